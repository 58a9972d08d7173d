public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// The completion-handler forms of the task factories, as URLSession and AFNetworking have
/// them: the handler is called once, in the session's delivery context, after the delegate's
/// `didCompleteWithError`, with the result, the response and the error. The task is returned
/// suspended; call ``SessionTask/resume()``.
extension Session {
    /// A handler given a response body.
    public typealias DataCompletion = @Sendable (Data?, HTTPResponse?, FerryError?) -> Void
    /// A handler given a downloaded file.
    public typealias DownloadCompletion = @Sendable (URL?, HTTPResponse?, FerryError?) -> Void

    /// A data task whose handler gets the body.
    public func dataTask(with request: URLRequest, completionHandler: @escaping DataCompletion) -> DataTask {
        withBody(dataTask(with: request), completionHandler)
    }

    /// An upload task sending `data`, whose handler gets the response body.
    public func uploadTask(
        with request: URLRequest,
        from data: Data,
        completionHandler: @escaping DataCompletion
    ) -> UploadTask {
        withBody(uploadTask(with: request, from: data), completionHandler)
    }

    /// An upload task streaming the file at `fileURL`, whose handler gets the response body.
    public func uploadTask(
        with request: URLRequest,
        fromFile fileURL: URL,
        completionHandler: @escaping DataCompletion
    ) -> UploadTask {
        withBody(uploadTask(with: request, fromFile: fileURL), completionHandler)
    }

    /// A download task whose handler gets the file at its destination.
    public func downloadTask(
        with request: URLRequest,
        to destination: DownloadDestination,
        completionHandler: @escaping DownloadCompletion
    ) -> DownloadTask {
        withFile(downloadTask(with: request, to: destination), removingAfterHandler: false, completionHandler)
    }

    /// A download task whose handler gets the file at a temporary location, as URLSession's
    /// `downloadTask(with:completionHandler:)`: move or read it in the handler; whatever is
    /// left there is removed when the handler returns.
    public func downloadTask(with request: URLRequest, completionHandler: @escaping DownloadCompletion) -> DownloadTask
    {
        withFile(downloadTask(request, nil, .handOver), removingAfterHandler: true, completionHandler)
    }

    /// A download task for a GET of `url`, its file handed to the handler (see the
    /// `URLRequest` form).
    public func downloadTask(with url: URL, completionHandler: @escaping DownloadCompletion) -> DownloadTask {
        downloadTask(with: URLRequest(url: url), completionHandler: completionHandler)
    }

    /// A download task that continues from `resumeData`, whose handler gets the file at a
    /// temporary location (removed when the handler returns), as URLSession's
    /// `downloadTask(withResumeData:completionHandler:)`.
    ///
    /// - Parameters:
    ///   - resumeData: What a cancelled or failed download left (``DownloadTask/cancelProducingResumeData()``).
    ///   - headers: Header fields to add, such as credentials, which resume data never keeps.
    ///   - completionHandler: Called once, with the file's temporary location, the response
    ///     and `nil`, or with the error.
    public func downloadTask(
        withResumeData resumeData: ResumeData,
        headers: [String: String] = [:],
        completionHandler: @escaping DownloadCompletion
    ) -> DownloadTask {
        withFile(
            downloadTask(URLRequest(resuming: resumeData, headers: headers), resumeData, .handOver),
            removingAfterHandler: true,
            completionHandler
        )
    }

    private func withBody<Task: DataTask>(_ task: Task, _ handler: @escaping DataCompletion) -> Task {
        task.client.setCompletionHandler { task, error in
            handler(error == nil ? (task as? DataTask)?.receivedData : nil, task.response, error)
        }
        return task
    }

    private func withFile(
        _ task: DownloadTask,
        removingAfterHandler removes: Bool,
        _ handler: @escaping DownloadCompletion
    ) -> DownloadTask {
        task.client.setCompletionHandler { task, error in
            let file = error == nil ? (task as? DownloadTask)?.fileURL : nil
            handler(file, task.response, error)
            if removes, let file { FileSystem.removeIfPresent(file) }
        }
        return task
    }
}
