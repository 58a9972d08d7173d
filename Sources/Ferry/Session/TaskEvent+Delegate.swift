extension TaskEvent {
    /// Calls the delegate method that stands for this event of `task`, if there is one.
    ///
    /// Runs in the session's serial delivery context, in the order the events happened.
    /// Events with no delegate method (``resumed``, ``response(_:)``, ``segments(_:reason:)``…)
    /// reach only the session's ``Session/events`` and the task's own streams.
    /// ``completed(_:)`` also runs the task's completion handler, after the delegate.
    ///
    /// - Parameters:
    ///   - task: The task the event belongs to.
    ///   - delegate: The session's delegate, or `nil` when it has none (or was released).
    ///   - session: The session, passed on to the delegate.
    func deliver(of task: SessionTask, to delegate: (any SessionDelegate)?, in session: Session) {
        switch self {
        case .data(let data):
            if let dataTask = task as? DataTask { delegate?.session(session, dataTask: dataTask, didReceive: data) }
        case .sentBodyData(let sent, let total, let expected):
            delegate?.session(
                session,
                task: task,
                didSendBodyData: sent,
                totalBytesSent: total,
                totalBytesExpectedToSend: expected
            )
        case .wroteData(let written, let total, let expected):
            if let download = task as? DownloadTask {
                delegate?.session(
                    session,
                    downloadTask: download,
                    didWriteData: written,
                    totalBytesWritten: total,
                    totalBytesExpectedToWrite: expected
                )
            }
        case .resumedAtOffset(let offset, let expected):
            if let download = task as? DownloadTask {
                delegate?.session(
                    session,
                    downloadTask: download,
                    didResumeAtOffset: offset,
                    expectedTotalBytes: expected
                )
            }
        case .finishedDownloading(let location):
            if let download = task as? DownloadTask {
                delegate?.session(session, downloadTask: download, didFinishDownloadingTo: location)
            }
        case .becameDownload(let download):
            if let dataTask = task as? DataTask { delegate?.session(session, dataTask: dataTask, didBecome: download) }
        case .becameStreamTask(let stream):
            if let dataTask = task as? DataTask { delegate?.session(session, dataTask: dataTask, didBecome: stream) }
        case .informationalResponse(let response):
            delegate?.session(session, task: task, didReceiveInformationalResponse: response)
        case .finishedCollectingMetrics(let metrics):
            delegate?.session(session, task: task, didFinishCollecting: metrics)
        case .completed(let error):
            delegate?.session(session, task: task, didCompleteWithError: error)
            task.client.takeCompletionHandler()?(task, error)
        case .resumed, .suspended, .willRedirect, .response, .trailers, .movedDownload, .failedToMoveDownload,
            .willRetry, .segments:
            break
        }
    }
}
