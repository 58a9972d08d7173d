public import Dispatch

/// Progress closures, as AFNetworking's `uploadProgress:` / `downloadProgress:` blocks and
/// Alamofire's `uploadProgress(queue:closure:)`: set at any time, called in order, the last
/// call at 100 % when the task succeeds, every call before the completion handler's (also
/// those run on a `queue`).
extension SessionTask {
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
        client.setProgressHandler(.init(queue: queue, closure: handler), upload: true)
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
        client.setProgressHandler(.init(queue: queue, closure: handler), upload: false)
        return self
    }

}
