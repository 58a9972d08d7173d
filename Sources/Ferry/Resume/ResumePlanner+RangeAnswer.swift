extension ResumePlanner {
    /// What a `206` carries, held against the version and the byte it was asked to continue.
    ///
    /// The one judgement of a range answer (RFC 9110 §14.4, §15.3.7). The download on one
    /// connection (``ResumePlanner/evaluate(_:for:)``) and every segment of a split download
    /// ask it, so a `206` is taken, or refused, for the same reasons wherever it arrives; each
    /// caller decides only what a refusal costs it (a restart, a failure, abandoned segments).
    enum RangeAnswer: Sendable, Equatable {
        /// Bytes from the one asked for on: skip the body's first `skip` bytes, then write
        /// `length` bytes. `complete`: the representation's length, when the server states it.
        case continues(skip: Int64, length: Int64, complete: Int64?)
        /// The `Content-Range` does not parse, or the `Content-Length` contradicts it.
        case malformed(String)
        /// The body is content-coded: its range counts coded bytes, which need not line up
        /// with the bytes on disk.
        case coded
        /// Another version of the resource: another strong validator, or another complete
        /// length.
        case otherVersion
        /// A range of the same version that does not cover the byte asked for.
        case misplaced(first: Int64, last: Int64)
    }

    /// Judges `response`, a `206`, as the continuation of the bytes from `offset` on.
    ///
    /// - Parameters:
    ///   - response: The `206`'s head.
    ///   - offset: The first byte the caller needs.
    ///   - validator: The validator of the bytes already written, if any: a `206` carrying
    ///     another one belongs to another version (one carrying none is taken on the
    ///     `If-Range` the request sent).
    ///   - totalLength: The representation's length, when known.
    static func judgeRange(
        _ response: HTTPResponse,
        from offset: Int64,
        validator: Validator?,
        totalLength: Int64?
    ) -> RangeAnswer {
        guard let header = response.headers["Content-Range"],
            case .satisfied(let first, let last, let complete)? = ContentRange(header)
        else {
            return .malformed(
                "The server answered 206 with a Content-Range that does not parse: '\(response.headers["Content-Range"] ?? "none")'."
            )
        }
        if let length = response.expectedContentLength, length != last - first + 1 {
            return .malformed("The 206's Content-Length (\(length)) does not match its Content-Range (\(header)).")
        }
        if isCoded(response) { return .coded }
        if let validator, let offered = Validator(response: response), offered != validator { return .otherVersion }
        if let totalLength, let complete, totalLength != complete { return .otherVersion }
        // It must cover the next byte needed; bytes before it are skipped, never appended.
        guard first <= offset, last >= offset else { return .misplaced(first: first, last: last) }
        return .continues(skip: offset - first, length: last - offset + 1, complete: complete)
    }

    /// Why a whole body (`200`) answering a range request does not continue the bytes on
    /// disk: their version changed (the `If-Range` failed), or the server ignores ranges.
    static func wholeAnswer(_ response: HTTPResponse, toRangeOf validator: Validator?) -> RestartReason {
        validator.map { $0.matches(response) } == false ? .representationChanged : .serverIgnoredRange
    }

    /// Whether the response carries a content coding (other than `identity`).
    static func isCoded(_ response: HTTPResponse) -> Bool {
        response.headers["Content-Encoding"].map { !$0.isEmpty && $0.lowercased() != "identity" } ?? false
    }
}
