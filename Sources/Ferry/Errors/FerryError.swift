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
    /// The parts most errors lack, boxed: a thrown `FerryError` is held in the frame of every
    /// `async throws(FerryError)` function it passes through, and every Swift task holds
    /// those frames while it waits (a download queued behind the per-host limit). Inline,
    /// these fields made the error 432 bytes and such a frame kilobytes; boxed, the error is
    /// the size of its reason, message and one reference.
    private var details: Details?

    /// The response, when the failure came after one arrived.
    public var response: HTTPResponse? {
        get { details?.fields.response }
        set { change { $0.response = newValue } }
    }
    /// The first bytes of an error response's body (at most 64 KiB), kept for diagnostics.
    public var responseBodyPrefix: Data? {
        get { details?.fields.responseBodyPrefix }
        set { change { $0.responseBodyPrefix = newValue } }
    }
    /// The error of the layer below (AsyncHTTPClient, NIO, TLS, the file system, a
    /// serializer) that caused this one, kept as it was thrown.
    public var underlying: (any Error)? {
        get { details?.fields.underlying }
        set { change { $0.underlying = newValue } }
    }
    /// For a download that failed or was cancelled part-way: what continues it
    /// (`NSURLSessionDownloadTaskResumeData` in URLSession's terms).
    public var resumeData: ResumeData? {
        get { details?.fields.resumeData }
        set { change { $0.resumeData = newValue } }
    }
    /// For a resumable upload (``ResumableUploadPolicy``) that failed or was cancelled with
    /// ``UploadTask/cancelProducingResumeData()`` after its upload resource was created: what
    /// continues it from the server's offset.
    public var uploadResumeData: UploadResumeData? {
        get { details?.fields.uploadResumeData }
        set { change { $0.uploadResumeData = newValue } }
    }

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
        let fields = Details.Fields(response: response, responseBodyPrefix: responseBodyPrefix, underlying: underlying)
        details = fields.isEmpty ? nil : Details(fields)
    }

    /// Changes one of the boxed fields: the box is never shared in a changed state, since a
    /// change makes a new one (copy on write, without a uniqueness check).
    private mutating func change(_ body: (inout Details.Fields) -> Void) {
        var fields = details?.fields ?? Details.Fields()
        body(&fields)
        details = fields.isEmpty ? nil : Details(fields)
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
    /// The boxed fields of a ``FerryError``; immutable, so one box may be shared by copies.
    private final class Details: Sendable {
        struct Fields: Sendable {
            var response: HTTPResponse?
            var responseBodyPrefix: Data?
            var underlying: (any Error)?
            var resumeData: ResumeData?
            var uploadResumeData: UploadResumeData?

            var isEmpty: Bool {
                response == nil && responseBodyPrefix == nil && underlying == nil && resumeData == nil
                    && uploadResumeData == nil
            }
        }

        let fields: Fields

        init(_ fields: Fields) { self.fields = fields }
    }
}

extension FerryError {
    static func cancelled() -> FerryError { FerryError(.cancelled, "The task was cancelled.") }
}
