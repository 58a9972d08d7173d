public import Foundation

/// The one error type Ferry throws: a reason that says what went wrong and what to do.
///
/// Every failure a server, the network, the file system or a caller can cause arrives as a
/// `FerryError`. Compare or switch over ``reason`` to react (a `switch` needs a `default`:
/// later versions may add reasons); use ``description`` to show it to a person, and
/// ``underlying`` for the lower layer's own error.
///
/// ```swift
/// do {
///     let (data, _) = try await session.data(from: url)
/// } catch let error as FerryError where error.reason == .timedOut(.idle) {
///     // retry later
/// }
/// ```
public struct FerryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which timeout fired. Later versions may add timeouts: switch with an
    /// `@unknown default`.
    @nonexhaustive(warn)
    public enum Timeout: Sendable, Hashable {
        /// No byte moved for `timeoutIntervalForRequest`.
        case idle
        /// The task ran longer than `timeoutIntervalForResource`.
        case resource
    }

    /// What went wrong.
    public var reason: Reason
    /// A one-line explanation for people, naming the URL or file involved.
    public var message: String
    /// The response, when the failure came after one arrived.
    public var response: HTTPResponse?
    /// The first bytes of an error response's body (at most 64 KiB), kept for diagnostics.
    public var responseBodyPrefix: Data?
    /// The error of the layer below (AsyncHTTPClient, NIO, TLS, the file system, a
    /// serializer) that caused this one, kept as it was thrown.
    public var underlying: (any Error)?
    /// For a download that failed or was cancelled part-way: what continues it
    /// (`NSURLSessionDownloadTaskResumeData` in URLSession's terms).
    public var resumeData: ResumeData?
    /// For a resumable upload (``ResumableUploadPolicy``) that failed or was cancelled with
    /// ``UploadTask/cancelProducingResumeData()`` after its upload resource was created: what
    /// continues it from the server's offset.
    public var uploadResumeData: UploadResumeData?

    /// Creates an error.
    public init(
        _ reason: Reason,
        _ message: String,
        response: HTTPResponse? = nil,
        responseBodyPrefix: Data? = nil,
        underlying: (any Error)? = nil
    ) {
        self.reason = reason
        self.message = message
        self.response = response
        self.responseBodyPrefix = responseBodyPrefix
        self.underlying = underlying
    }

    public var description: String {
        if let underlying { return "\(message) (\(underlying))" }
        return message
    }

    public static func == (lhs: FerryError, rhs: FerryError) -> Bool {
        lhs.reason == rhs.reason && lhs.message == rhs.message
    }
}

extension FerryError {
    static func cancelled() -> FerryError { FerryError(.cancelled, "The task was cancelled.") }
}
