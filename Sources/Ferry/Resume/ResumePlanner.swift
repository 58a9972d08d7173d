/// Decides, without I/O, how to continue a download and what to make of each response.
///
/// It holds what is known about the partial file (bytes on disk, total length, validator)
/// and answers two questions:
/// - ``nextRequest()``: a full request, or `Range: bytes=N-` with `If-Range` (RFC 9110 §14.2,
///   §13.1.5). A range is asked only when the bytes on disk are tied to a strong validator
///   (or the caller opted into unvalidated resume).
/// - ``evaluate(_:for:)``: write a 200 from byte 0 (the server ignored the range or the
///   resource changed), write a 206 at the offset it really starts at, finish on a 416 that
///   proves the file complete, restart on any other 416, and refuse anything that does not
///   parse or fit.
///
/// The owner performs the writes and reports progress back with ``recordWritten(upTo:)``.
struct ResumePlanner: Sendable, Equatable {
    /// What is known about the partial file.
    struct Partial: Sendable, Equatable {
        var bytesOnDisk: Int64 = 0
        var totalLength: Int64?
        var validator: Validator?
        /// The bytes carry a content coding (the request asked for one and the server
        /// applied it): never continued with a range, since servers that code on the fly
        /// may reuse one validator for coded and plain bytes.
        var encoded = false
    }

    private(set) var partial: Partial
    /// Resume without a validator when the caller accepts the risk (or checks a checksum).
    let allowUnvalidatedResume: Bool

    init(partial: Partial = Partial(), allowUnvalidatedResume: Bool = false) {
        self.partial = partial
        self.allowUnvalidatedResume = allowUnvalidatedResume
    }

    enum RequestPlan: Sendable, Equatable {
        /// Ask for the whole representation; any bytes on disk are discarded first.
        case full
        /// Ask for bytes from `offset` on, with `If-Range` when there is a validator.
        case range(from: Int64, ifRange: String?)
    }

    /// Why the partial file is discarded.
    enum RestartReason: Sendable, Equatable {
        case noStrongValidator
        case partialLargerThanTotal
        case serverIgnoredRange
        case representationChanged
        case unsatisfiableRange
        case unusableRange
    }

    func nextRequest() -> RequestPlan {
        guard partial.bytesOnDisk > 0, !partial.encoded else { return .full }
        if let total = partial.totalLength, partial.bytesOnDisk > total { return .full }
        if let validator = partial.validator {
            return .range(from: partial.bytesOnDisk, ifRange: validator.headerValue)
        }
        return allowUnvalidatedResume ? .range(from: partial.bytesOnDisk, ifRange: nil) : .full
    }

    /// Why ``nextRequest()`` asks for the whole body although bytes are on disk, if it does.
    var restartReason: RestartReason? {
        guard partial.bytesOnDisk > 0, nextRequest() == .full else { return nil }
        if let total = partial.totalLength, partial.bytesOnDisk > total { return .partialLargerThanTotal }
        return .noStrongValidator
    }

    enum ResponseAction: Sendable, Equatable {
        /// Discard the partial and write this body from byte 0.
        case writeFromStart(expectedLength: Int64?, restart: RestartReason?)
        /// Skip the first `skip` body bytes, then write `length` bytes at `offset`.
        case writeRange(offset: Int64, skip: Int64, length: Int64)
        /// The file on disk is already the whole representation.
        case complete
        /// Discard the partial and ask again for the whole representation.
        case restart(RestartReason)
        /// The response cannot be used.
        case fail(FerryError)
    }

    /// What to do with `response`, the answer to `plan`.
    mutating func evaluate(_ response: HTTPResponse, for plan: RequestPlan) -> ResponseAction {
        let status = response.statusCode
        switch status {
        case 206:
            return evaluatePartial(response, for: plan)
        case 416:
            guard case .range = plan else {
                return .fail(
                    FerryError(
                        .unacceptableStatusCode(416),
                        "\(response.url.absoluteString): HTTP 416 to a request without Range",
                        response: response
                    )
                )
            }
            guard case .unsatisfied(let complete)? = response.headers["Content-Range"].flatMap(ContentRange.init)
            else { return .restart(.unsatisfiableRange) }
            let validatorHolds = partial.validator.map { $0.matches(response) } ?? allowUnvalidatedResume
            if case .range = plan, complete == partial.bytesOnDisk, validatorHolds,
                partial.totalLength.map({ $0 == complete }) ?? true
            {
                partial.totalLength = complete
                return .complete
            }
            return .restart(.unsatisfiableRange)
        case 200..<300:
            let restart: RestartReason? =
                if case .range = plan {
                    Self.wholeAnswer(response, toRangeOf: partial.validator)
                } else {
                    restartReason
                }
            let length = response.expectedBodyLength(forMethod: .get)
            partial = Partial(
                bytesOnDisk: 0,
                totalLength: length,
                validator: Validator(response: response),
                encoded: Self.isCoded(response)
            )
            return .writeFromStart(expectedLength: length, restart: restart)
        default:
            return .fail(
                FerryError(
                    .unacceptableStatusCode(status),
                    "\(response.url.absoluteString): HTTP \(status)\(response.reasonPhrase.isEmpty ? "" : " " + response.reasonPhrase)",
                    response: response
                )
            )
        }
    }

    private mutating func evaluatePartial(_ response: HTTPResponse, for plan: RequestPlan) -> ResponseAction {
        let offset: Int64
        switch plan {
        case .full: offset = 0
        case .range(let from, _): offset = from
        }
        let answer = Self.judgeRange(
            response,
            from: offset,
            validator: partial.validator,
            totalLength: partial.totalLength
        )
        switch answer {
        case .malformed(let message):
            return .fail(FerryError(.badServerResponse, message, response: response))
        case .coded, .misplaced:
            return .restart(.unusableRange)
        case .otherVersion:
            return .restart(.representationChanged)
        case .continues(let skip, let length, let complete):
            if partial.totalLength == nil { partial.totalLength = complete }
            return .writeRange(offset: offset, skip: skip, length: length)
        }
    }

    /// The owner wrote (and will flush) bytes up to `end`.
    mutating func recordWritten(upTo end: Int64) { partial.bytesOnDisk = end }

    /// The owner discarded the partial file.
    mutating func reset() { partial.bytesOnDisk = 0 }

    /// Whether the bytes on disk could be continued later (what checkpoints and resume data
    /// are for): tied to a strong validator, or unvalidated resume allowed, and not coded.
    func canResume(withChecksum checksum: Bool) -> Bool {
        !partial.encoded && (partial.validator != nil || allowUnvalidatedResume || checksum)
    }

    /// Whether every byte of a known total is on disk.
    var isComplete: Bool { partial.totalLength.map { partial.bytesOnDisk == $0 } ?? false }
}
