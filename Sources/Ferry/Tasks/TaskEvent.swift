public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Something that happened to one task. Every API style is fed from these.
///
/// Per task, events arrive in this order: `resumed`, then any `willRedirect` and
/// `informationalResponse`, then `response`, then `data` / `sentBodyData` / `wroteData` (interleaved with `suspended` /
/// `resumed`), then for downloads `finishedDownloading` and `movedDownload` (or
/// `failedToMoveDownload`), and last exactly one `completed`.
///
/// Later versions add events (as they added `segments` and `becameStreamTask`): switch over
/// them with an `@unknown default`, so that a new event never stops your code compiling.
@nonexhaustive(warn)
public enum TaskEvent: Sendable {
    /// The task started or continued.
    case resumed
    /// The task stopped reading; its connection stays open (back-pressure).
    case suspended
    /// A redirect is being followed with `newRequest`.
    case willRedirect(response: HTTPResponse, newRequest: URLRequest)
    /// An interim (1xx) response arrived before the final one: `103 Early Hints` (its `Link`
    /// fields name what the final response will need), `100 Continue`. Its fields are not
    /// the final response's. Like URLSession's `didReceiveInformationalResponse`; reported
    /// by Ferry's own HTTP/2 connections (AsyncHTTPClient, which carries HTTP/1.1, drops
    /// them).
    case informationalResponse(HTTPResponse)
    /// The final response head arrived.
    case response(HTTPResponse)
    /// The response's trailer fields (RFC 9110 §6.5: checksums, gRPC statuses, sent after
    /// the body), once its last byte was read and before the task completes. Reported by
    /// Ferry's own HTTP/2 connections; AsyncHTTPClient's, which carry HTTP/1.1, drop them.
    case trailers(HeaderFields)
    /// Body bytes arrived (data and upload tasks).
    case data(Data)
    /// Request body bytes were handed to the connection. `totalBytesExpectedToSend` is
    /// `nil` for a stream of unknown length.
    case sentBodyData(bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64?)
    /// A download continues at `offset` of the file (0 when bytes already on disk could not
    /// be reused and were discarded). Like URLSession's `didResumeAtOffset`. An upload that
    /// the server lets resume (``ResumableUploadPolicy``) continues at the offset the server
    /// holds; `countOfBytesSent` starts again from there.
    case resumedAtOffset(Int64, expectedTotalBytes: Int64?)
    /// A download, or an upload the server lets resume, will try again after `delay`
    /// seconds, because of `error`.
    case willRetry(attempt: Int, delay: TimeInterval, error: FerryError)
    /// Body bytes were written to the partial file. `totalBytesExpectedToWrite` is `nil` when
    /// the server did not say.
    case wroteData(bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64?)
    /// The data task's body continues in `downloadTask` (disposition `.becomeDownload`).
    case becameDownload(DownloadTask)
    /// A download asked for more than one connection and chose `count` segments; with one,
    /// `reason` says why it did not split (no strong validator, no length, no byte ranges,
    /// too small, or a server that ignored a range).
    case segments(Int, reason: String?)
    /// The data task's connection continues as `streamTask`, already running: its `Upgrade`
    /// was answered with `101`, or its `CONNECT` with `2xx` (URLSession's
    /// `didBecomeStreamTask`). The data task completes without a body.
    case becameStreamTask(StreamTask)
    /// The whole body is on disk at `location` (a file in the session's directory).
    case finishedDownloading(location: URL)
    /// The downloaded file was moved to its destination.
    case movedDownload(to: URL)
    /// The downloaded file could not be moved to its destination.
    case failedToMoveDownload(FerryError)
    /// What the task's requests took; sent once, just before ``completed(_:)``.
    case finishedCollectingMetrics(TaskMetrics)
    /// The task ended: `nil` is success. Sent exactly once, always last.
    case completed(FerryError?)
}

/// Something that happened in a session: a task's event, or the session's end.
///
/// The session-wide stream plays the role of AFNetworking's notifications
/// (`AFNetworkingTaskDidResumeNotification`, `…DidCompleteNotification`, …). Later versions may
/// add events: switch with an `@unknown default`.
@nonexhaustive(warn)
public enum SessionEvent: Sendable {
    /// An event of `task`.
    case task(SessionTask, TaskEvent)
    /// A background session delivered every event the daemon kept for it while no process
    /// was attached (URLSession's `urlSessionDidFinishEvents(forBackgroundURLSession:)`).
    case didFinishEventsForBackgroundSession
    /// The session was invalidated; no task will run in it again.
    case didBecomeInvalid(FerryError?)
}

/// How far a transfer has come.
public struct TransferProgress: Sendable, Equatable {
    /// Bytes done.
    public var completedBytes: Int64
    /// Bytes expected, or `nil` while unknown.
    public var totalBytes: Int64?

    /// Progress of `completedBytes` out of `totalBytes` (`nil`: unknown).
    public init(completedBytes: Int64 = 0, totalBytes: Int64? = nil) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// `completedBytes / totalBytes`, or `nil` while the total is unknown.
    public var fractionCompleted: Double? {
        guard let totalBytes else { return nil }
        guard totalBytes > 0 else { return 1 }
        return min(1, Double(completedBytes) / Double(totalBytes))
    }
}
