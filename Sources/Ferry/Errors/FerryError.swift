public import Foundation

/// The one error type Ferry throws: a reason that says what went wrong and what to do.
///
/// Every failure a server, the network, the file system or a caller can cause arrives as a
/// `FerryError`. Switch over ``reason`` to react; use ``description`` to show it to a person.
///
/// ```swift
/// do {
///     let (data, _) = try await session.data(from: url)
/// } catch let error as FerryError where error.reason == .timedOut(.idle) {
///     // retry later
/// }
/// ```
public struct FerryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Why a transfer failed.
    public enum Reason: Sendable, Equatable {
        /// The task was cancelled by its owner, by ``Session/invalidateAndCancel()`` or by the
        /// cancellation of the Swift task awaiting it.
        case cancelled
        /// The session was invalidated before the task was created or started.
        case sessionInvalidated
        /// The configuration asks for something this build cannot do or refuses to do (an
        /// `https://` proxy, invalid limits, unusable TLS options).
        case unsupportedConfiguration
        /// The URL is not an absolute `http` or `https` URL with a host.
        case invalidURL
        /// The request is malformed (for example a header value with CR or LF).
        case invalidRequest
        /// No byte moved for `timeoutIntervalForRequest` (`.idle`), or the whole task took
        /// longer than `timeoutIntervalForResource` (`.resource`).
        case timedOut(Timeout)
        /// The connection could not be made or broke while the transfer ran.
        case network
        /// The TLS handshake failed: most often the server's certificate is not trusted (not
        /// signed by a trusted root, not for this host, expired, or not the pinned one).
        case secureConnectionFailed
        /// The server answered something that is not valid HTTP for this request (for example a
        /// body shorter than its `Content-Length`).
        case badServerResponse
        /// The response status is not one the task accepts (download tasks accept 2xx only;
        /// data tasks only after ``ResponseValidation`` says so).
        case unacceptableStatusCode(Int)
        /// The response's content type is not one the validation accepts.
        case unacceptableContentType(String?)
        /// A data task's body grew past `maximumInMemoryBodySize`, a download's past
        /// `maximumFileSize`, or a decoded download past `maximumDecompressionRatio` times its
        /// coded size (then `limit` is that size).
        case bodyTooLarge(limit: Int64)
        /// More redirects than the configuration allows, or a redirect to a non-HTTP URL.
        case redirectFailed
        /// A request body cannot be sent again (a one-shot stream) but a redirect needed it.
        case bodyNotReplayable
        /// An upload's body did not match its declared length, or its file could not be read.
        case uploadBodyFailed
        /// The downloaded file could not be written or moved to its destination.
        case fileSystem
        /// The response body could not be turned into the requested value.
        case serializationFailed
        /// The delegate cancelled the task when it saw the response.
        case cancelledByDelegate
        /// Resume data that is not Ferry's, is of another format version, or is inconsistent.
        case invalidResumeData
        /// The downloaded file does not have the checksum the caller expected.
        case checksumMismatch
        /// Another download is writing the same destination file.
        case destinationInUse
        /// The destination file exists, and the destination's options do not allow replacing
        /// it (no ``DownloadDestination/Options/removePreviousFile``).
        case destinationExists
    }

    /// Which timeout fired.
    public enum Timeout: Sendable, Equatable {
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
    /// The underlying error's description, if another library reported it.
    public var underlying: String?
    /// For a download that failed or was cancelled part-way: what continues it
    /// (`NSURLSessionDownloadTaskResumeData` in URLSession's terms).
    public var resumeData: ResumeData?

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
        self.underlying = underlying.map { String(describing: $0) }
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
