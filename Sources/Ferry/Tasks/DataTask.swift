public import Foundation

/// A task whose response body is kept in memory, bounded by
/// ``SessionConfiguration/maximumInMemoryBodySize``. Like `URLSessionDataTask`.
public class DataTask: SessionTask, @unchecked Sendable {
    /// The body received so far is only handed out at completion; this is its result.
    public var receivedData: Data? {
        if case .data(let data) = outcome { return data }
        return nil
    }
}

/// A data task that sends a body: from `Data`, a file streamed from disk, or an async
/// sequence of bytes. Like `URLSessionUploadTask`.
public final class UploadTask: DataTask, @unchecked Sendable {}
