public import Foundation

/// A task whose response body streams to a partial file in the session's downloads
/// directory and is then handed to its destination. Like `URLSessionDownloadTask`.
///
/// Only a 2xx response's body is written: any other status fails the task with
/// ``FerryError/Reason/unacceptableStatusCode(_:)`` and the first 64 KiB of the error body in
/// ``FerryError/responseBodyPrefix``; nothing reaches the destination.
public final class DownloadTask: SessionTask, @unchecked Sendable {
    /// Where the file ended up, once the task completed successfully.
    public var fileURL: URL? { client.outcome?.file }

    /// Most connections this download may use at once; `nil` (the default) takes the
    /// session's ``SessionConfiguration/maximumConnectionsPerDownload``. Set before
    /// ``SessionTask/resume()``. See ``TaskEvent/segments(_:reason:)`` for what the download chose.
    public var maximumConnections: Int? {
        get { storage.withLock { $0.maximumConnections } }
        set { storage.withLock { $0.maximumConnections = newValue.map { max(1, $0) } } }
    }

    /// Cancels the download, keeping its partial file, and returns what continues it, or
    /// `nil` when there is nothing worth continuing (no byte on disk, no strong validator,
    /// or the download had already finished). Like URLSession's
    /// `cancel(byProducingResumeData:)`, and it works on Linux.
    ///
    /// ```swift
    /// if let resumeData = await task.cancelProducingResumeData() {
    ///     let continued = session.downloadTask(withResumeData: resumeData, to: .file(destination))
    ///     continued.resume()
    /// }
    /// ```
    public func cancelProducingResumeData() async -> ResumeData? {
        // The transfer keeps its partial file and makes resume data.
        storage.withLock { $0.producesResumeData = true }
        cancel()
        return await client.completion().0?.resumeData
    }

    /// Returns once the task has completed (``SessionTask/error`` then says how), without subscribing to
    /// its events: for a caller that only waits, as `ferry get`'s jobs do, where a
    /// subscription costs a stream and a resumption for every event it is sent.
    package func completed() async { _ = await client.completion() }

    /// Completion-handler form of ``cancelProducingResumeData()``.
    public func cancel(byProducingResumeData completionHandler: @escaping @Sendable (ResumeData?) -> Void) {
        Task { completionHandler(await cancelProducingResumeData()) }
    }
}
