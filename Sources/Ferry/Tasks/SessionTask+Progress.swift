public import Dispatch

/// Progress closures, as AFNetworking's `uploadProgress:` / `downloadProgress:` blocks and
/// Alamofire's `uploadProgress(queue:closure:)`: set at any time, called in order, the last
/// call at 100 % when the task succeeds, every call before the completion handler's (also
/// those run on a `queue`).
extension SessionTask {
    /// A progress closure and where it runs.
    struct ProgressHandler: Sendable {
        let queue: DispatchQueue?
        let closure: @Sendable (TransferProgress) -> Void
        /// Coalesces a data task's received bytes, which come without their own events.
        var throttle = ProgressThrottle()
        /// The last call's progress, so the final one is not repeated.
        var lastReported: TransferProgress?

        func call(_ progress: TransferProgress) {
            if let queue {
                queue.async { closure(progress) }
            } else {
                closure(progress)
            }
        }
    }

    /// Calls `handler` with the request body's progress as the connection takes it, at most
    /// every 50 ms, in order, and once more at 100 % when the task succeeds.
    ///
    /// Set it before or after ``resume()``: a handler set later hears of the progress from
    /// then on (and, if the task already succeeded, gets the final call at once). The calls
    /// run in the session's serial delivery context, after the events published before them,
    /// or on `queue` (a serial queue keeps their order).
    ///
    /// ```swift
    /// task.onUploadProgress(queue: .main) { progress in bar.value = progress.fractionCompleted ?? 0 }
    /// ```
    ///
    /// - Returns: The task, so calls can be chained.
    @discardableResult
    public func onUploadProgress(
        queue: DispatchQueue? = nil,
        _ handler: @escaping @Sendable (TransferProgress) -> Void
    ) -> Self {
        setProgressHandler(ProgressHandler(queue: queue, closure: handler), upload: true)
        return self
    }

    /// Calls `handler` with the response body's progress (bytes received, of
    /// `Content-Length` when known), at most every 50 ms, in order, and once more at 100 %
    /// when the task succeeds. See ``onUploadProgress(queue:_:)`` for when and where.
    ///
    /// - Returns: The task, so calls can be chained.
    @discardableResult
    public func onDownloadProgress(
        queue: DispatchQueue? = nil,
        _ handler: @escaping @Sendable (TransferProgress) -> Void
    ) -> Self {
        setProgressHandler(ProgressHandler(queue: queue, closure: handler), upload: false)
        return self
    }

    private func setProgressHandler(_ handler: ProgressHandler, upload: Bool) {
        storage.withLock { storage in
            if upload {
                storage.uploadProgressHandler = handler
            } else {
                storage.downloadProgressHandler = handler
            }
            // A task that already succeeded gives a late handler its final call.
            if storage.machine.publicState == .completed, storage.error == nil {
                reportFinalProgress(in: &storage)
            }
        }
    }

    /// Reports the upload (`upload`) or download progress the counters show now to its
    /// handler, if one is set, in the delivery context. Called under the task's lock.
    func reportProgress(upload: Bool, in storage: inout Storage) {
        if upload {
            guard var handler = storage.uploadProgressHandler else { return }
            let progress = TransferProgress(completedBytes: storage.bytesSent, totalBytes: storage.bytesExpectedToSend)
            enqueue(progress, for: &handler)
            storage.uploadProgressHandler = handler
        } else {
            guard var handler = storage.downloadProgressHandler else { return }
            let progress = TransferProgress(
                completedBytes: storage.bytesReceived,
                totalBytes: storage.bytesExpectedToReceive
            )
            enqueue(progress, for: &handler)
            storage.downloadProgressHandler = handler
        }
    }

    /// Counts `count` bytes of a data task's body for its download handler; reports when
    /// one is due. Called under the task's lock.
    func countReceivedForProgress(_ count: Int64, in storage: inout Storage) {
        guard storage.downloadProgressHandler?.throttle.add(count) != nil else { return }
        reportProgress(upload: false, in: &storage)
    }

    /// The 100 % calls of a task that succeeded: what was done is the total, also when no
    /// length was announced. Called under the task's lock, before the completion is
    /// published, so handlers hear of it before the completion handler runs.
    func reportFinalProgress(in storage: inout Storage) {
        if var handler = storage.uploadProgressHandler, storage.bytesSent > 0 || storage.bytesExpectedToSend != nil {
            let done = storage.bytesSent
            enqueue(TransferProgress(completedBytes: done, totalBytes: done), for: &handler, unlessRepeated: true)
            storage.uploadProgressHandler = handler
        }
        if var handler = storage.downloadProgressHandler {
            let done = storage.bytesReceived
            enqueue(TransferProgress(completedBytes: done, totalBytes: done), for: &handler, unlessRepeated: true)
            storage.downloadProgressHandler = handler
        }
    }

    /// Holds the delivery context until every progress call sent to a handler's `queue` has
    /// run there, so the completion handler, delivered next, comes after the last of them
    /// (what a serial queue was given runs in order). Called under the task's lock, before
    /// the completion is published, whether or not the task succeeded.
    ///
    /// The wait is for the queue to run, as URLSession's deliveries wait for its delegate
    /// queue: a queue that never runs holds the session's later deliveries with it.
    func letProgressQueuesCatchUp(in storage: inout Storage) {
        let queues = [storage.uploadProgressHandler?.queue, storage.downloadProgressHandler?.queue].compactMap { $0 }
        guard !queues.isEmpty else { return }
        _ = hub.enqueue {
            for queue in queues {
                await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
            }
        }
    }

    private func enqueue(_ progress: TransferProgress, for handler: inout ProgressHandler, unlessRepeated: Bool = false)
    {
        if unlessRepeated, handler.lastReported == progress { return }
        handler.lastReported = progress
        let call = handler
        // The delivery context is serial and already holds the events published before. (A
        // session invalidated meanwhile delivers nothing more: no call.)
        _ = hub.enqueue { call.call(progress) }
    }
}
