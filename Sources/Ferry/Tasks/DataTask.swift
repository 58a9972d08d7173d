public import Foundation

/// A task whose response body is kept in memory, bounded by
/// ``SessionConfiguration/maximumInMemoryBodySize``. Like `URLSessionDataTask`.
public class DataTask: SessionTask, @unchecked Sendable {
    /// The response body, once the task completed successfully.
    public var receivedData: Data? { client.outcome?.data }
}

/// A data task that sends a body: from `Data`, a file streamed from disk, or an async
/// sequence of bytes. Like `URLSessionUploadTask`.
public final class UploadTask: DataTask, @unchecked Sendable {
    /// The upload resource of a resumable upload (``ResumableUploadPolicy``), once the server
    /// created it: with tus, the upload's URL; `nil` for an ordinary upload.
    public var uploadURL: URL? { storage.withLock { $0.uploadURL } }

    /// Cancels the upload and returns what continues it from the server's offset, or `nil`
    /// when there is nothing to continue (the server offered no resumable upload, no upload
    /// resource was created yet, or the upload had already finished). The upload resource is
    /// kept; a plain `cancel()` deletes it. URLSession's `cancel(byProducingResumeData:)` for
    /// upload tasks.
    ///
    /// ```swift
    /// if let resumeData = await task.cancelProducingResumeData() {
    ///     session.uploadTask(withResumeData: resumeData).resume()
    /// }
    /// ```
    public func cancelProducingResumeData() async -> UploadResumeData? {
        storage.withLock { $0.producesResumeData = true }
        cancel()
        return await client.completion().0?.uploadResumeData
    }

    /// Completion-handler form of ``cancelProducingResumeData()``.
    public func cancel(byProducingResumeData completionHandler: @escaping @Sendable (UploadResumeData?) -> Void) {
        Task { completionHandler(await cancelProducingResumeData()) }
    }
}
