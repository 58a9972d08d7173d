public import Foundation

/// A task whose response body is kept in memory, bounded by
/// ``SessionConfiguration/maximumInMemoryBodySize``. Like `URLSessionDataTask`.
public class DataTask: SessionTask, @unchecked Sendable {
    /// The response body, once the task completed successfully.
    public var receivedData: Data? { client.outcome?.data }
}

/// A data task that sends a body: from `Data`, a file streamed from disk, or an async
/// sequence of bytes. Like `URLSessionUploadTask`.
public final class UploadTask: DataTask, @unchecked Sendable {}
