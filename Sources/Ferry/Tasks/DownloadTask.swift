public import Foundation

/// A task whose response body streams to a partial file in the session's downloads
/// directory and is then handed to its destination. Like `URLSessionDownloadTask`.
///
/// Only a 2xx response's body is written: any other status fails the task with
/// ``FerryError/Reason/unacceptableStatusCode(_:)`` and the first 64 KiB of the error body in
/// ``FerryError/responseBodyPrefix``; nothing reaches the destination.
public final class DownloadTask: SessionTask, @unchecked Sendable {
    /// Where the file ended up, once the task completed successfully.
    public var fileURL: URL? { outcome?.file }
}
