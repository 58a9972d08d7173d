extension FerryError {
    /// Why a transfer failed: one of the static values below, compared with `==` or matched
    /// in a `switch` that has a `default`.
    ///
    /// A struct rather than an enum, so that a later version can add a reason without
    /// breaking a user's `switch` (AsyncHTTPClient's `HTTPClientError` does the same). The
    /// values some reasons carry are read through ``statusCode``, ``contentType``,
    /// ``timeout`` and ``limit``.
    ///
    /// ```swift
    /// switch error.reason {
    /// case .cancelled: return
    /// case .timedOut(.idle): scheduleRetry()
    /// default: if let status = error.reason.statusCode { show(status) }
    /// }
    /// ```
    public struct Reason: Sendable, Hashable, CustomStringConvertible {
        /// The reasons of this version, for code inside the package that must handle each
        /// (the command line's exit statuses, the retry rules).
        package enum Code: Sendable, Hashable {
            case cancelled, sessionInvalidated, unsupportedConfiguration, invalidURL, invalidRequest
            case timedOut(Timeout)
            case network, secureConnectionFailed, badServerResponse
            case unacceptableStatusCode(Int)
            case unacceptableContentType(String?)
            case bodyTooLarge(limit: Int64)
            case redirectFailed, bodyNotReplayable, uploadBodyFailed, fileSystem, serializationFailed
            case cancelledByDelegate, invalidResumeData, checksumMismatch, destinationInUse, destinationExists
        }

        package let code: Code

        private init(_ code: Code) { self.code = code }

        /// The task was cancelled by its owner, by ``Session/invalidateAndCancel()`` or by the
        /// cancellation of the Swift task awaiting it.
        public static let cancelled = Reason(.cancelled)
        /// The session was invalidated before the task was created or started.
        public static let sessionInvalidated = Reason(.sessionInvalidated)
        /// The configuration asks for something this build cannot do or refuses to do (an
        /// `https://` proxy, invalid limits, unusable TLS options).
        public static let unsupportedConfiguration = Reason(.unsupportedConfiguration)
        /// The URL is not an absolute `http` or `https` URL with a host.
        public static let invalidURL = Reason(.invalidURL)
        /// The request is malformed (for example a header value with CR or LF).
        public static let invalidRequest = Reason(.invalidRequest)
        /// No byte moved for `timeoutIntervalForRequest` (`.idle`), or the whole task took
        /// longer than `timeoutIntervalForResource` (`.resource`).
        public static func timedOut(_ which: Timeout) -> Reason { Reason(.timedOut(which)) }
        /// The connection could not be made or broke while the transfer ran.
        public static let network = Reason(.network)
        /// The TLS handshake failed: most often the server's certificate is not trusted (not
        /// signed by a trusted root, not for this host, expired, or not the pinned one).
        public static let secureConnectionFailed = Reason(.secureConnectionFailed)
        /// The server answered something that is not valid HTTP for this request (for example
        /// a body shorter than its `Content-Length`).
        public static let badServerResponse = Reason(.badServerResponse)
        /// The response status is not one the task accepts (download tasks accept 2xx only;
        /// data tasks only after ``ResponseValidation`` says so).
        public static func unacceptableStatusCode(_ status: Int) -> Reason { Reason(.unacceptableStatusCode(status)) }
        /// The response's content type (`nil`: it had none) is not one the validation accepts.
        public static func unacceptableContentType(_ type: String?) -> Reason {
            Reason(.unacceptableContentType(type))
        }
        /// A data task's body grew past `maximumInMemoryBodySize`, a download's past
        /// `maximumFileSize`, or a decoded download past `maximumDecompressionRatio` times its
        /// coded size (then `limit` is that size).
        public static func bodyTooLarge(limit: Int64) -> Reason { Reason(.bodyTooLarge(limit: limit)) }
        /// More redirects than the configuration allows, or a redirect to a non-HTTP URL.
        public static let redirectFailed = Reason(.redirectFailed)
        /// A request body cannot be sent again (a one-shot stream) but a redirect needed it.
        public static let bodyNotReplayable = Reason(.bodyNotReplayable)
        /// An upload's body did not match its declared length, or its file could not be read.
        public static let uploadBodyFailed = Reason(.uploadBodyFailed)
        /// The downloaded file could not be written or moved to its destination.
        public static let fileSystem = Reason(.fileSystem)
        /// The response body could not be turned into the requested value.
        public static let serializationFailed = Reason(.serializationFailed)
        /// The delegate cancelled the task when it saw the response.
        public static let cancelledByDelegate = Reason(.cancelledByDelegate)
        /// Resume data that is not Ferry's, is of another format version, or is inconsistent.
        public static let invalidResumeData = Reason(.invalidResumeData)
        /// The downloaded file does not have the checksum the caller expected.
        public static let checksumMismatch = Reason(.checksumMismatch)
        /// Another download is writing the same destination file.
        public static let destinationInUse = Reason(.destinationInUse)
        /// The destination file exists, and the destination's options do not allow replacing
        /// it (no ``DownloadDestination/Options/removePreviousFile``).
        public static let destinationExists = Reason(.destinationExists)

        /// The status of an ``unacceptableStatusCode(_:)`` reason.
        public var statusCode: Int? {
            if case .unacceptableStatusCode(let status) = code { status } else { nil }
        }

        /// The content type of an ``unacceptableContentType(_:)`` reason, when the response
        /// had one.
        public var contentType: String? {
            if case .unacceptableContentType(let type) = code { type } else { nil }
        }

        /// Which timeout a ``timedOut(_:)`` reason is.
        public var timeout: Timeout? {
            if case .timedOut(let which) = code { which } else { nil }
        }

        /// The size a ``bodyTooLarge(limit:)`` reason's body went past.
        public var limit: Int64? {
            if case .bodyTooLarge(let limit) = code { limit } else { nil }
        }

        /// Whether the server or the network caused it (any error status, a connection or TLS
        /// failure, a bad answer, a redirect that cannot be followed, a timeout), rather than
        /// this process, its files or its caller: what another try, or another mirror of
        /// the file, may get past.
        package var isServerOrNetwork: Bool {
            switch code {
            case .network, .secureConnectionFailed, .badServerResponse, .timedOut, .unacceptableStatusCode,
                .unacceptableContentType, .redirectFailed:
                true
            default:
                false
            }
        }

        /// The reason's name as written in Swift, for logs and JSON: `cancelled`,
        /// `timedOut(idle)`, `unacceptableStatusCode(404)`.
        public var description: String {
            switch code {
            case .timedOut(let which): "timedOut(\(which))"
            case .unacceptableStatusCode(let status): "unacceptableStatusCode(\(status))"
            case .unacceptableContentType(let type): "unacceptableContentType(\(type ?? "none"))"
            case .bodyTooLarge(let limit): "bodyTooLarge(limit: \(limit))"
            default: "\(code)"
            }
        }
    }
}
