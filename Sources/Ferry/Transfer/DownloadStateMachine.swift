import Foundation

/// The download loop as a value: what a download does next, from its start through every
/// response, failure and split, to its end. No I/O: it owns the ``ResumePlanner``, the
/// retry budget, the count of restarts and whether the download is split; ``Transfer``
/// performs each action it returns (sends, writes, waits, discards) and reports back.
///
/// ## Events and actions
/// - ``next(bytesOnDisk:)`` — what to do now: continue the segments of a split download,
///   or send the planner's next request (discarding bytes no request can continue).
/// - ``responseArrived(_:for:)`` — a response head, judged by the planner before a byte of
///   its body is written (one ``ResumePlanner/ResponseAction``): fail, restart (then
///   ``restarted()``), complete, write from the start (``split(_:length:)`` says whether
///   across connections), or write a range.
/// - ``splitStarted()``, ``wroteFromStart(upTo:)``, ``wroteRange(upTo:)``,
///   ``segmentsCompleted()`` — the body (or every segment) was written.
/// - ``failed(_:bytesOnDisk:cancelled:)`` — wait and retry, or fail.
/// - ``segmentsAbandoned(reason:rangesIgnored:)`` — the segments do not fit together: start
///   over (on one connection when ranges are ignored), or fail after too many restarts.
///
/// ## Guarantees
/// - Every retry, of a single connection or of segments, spends the one ``RetryBudget``.
/// - A download starts over at most ``Configuration/maximumRestarts`` times.
/// - After a server ignored a range, the download never splits again.
/// - Bytes the planner cannot continue are discarded (``Action/send(_:discardFirst:)``)
///   before a request that would write over them.
struct DownloadStateMachine: Sendable {
    /// What the loop needs to know of the session and the task, copied when it starts.
    struct Configuration: Sendable, Equatable {
        /// Connections the download may use (`maximumConnections` of the task, or the session's).
        var connections: Int
        /// No segment is smaller (``SessionConfiguration/minimumSegmentSize``).
        var minimumSegmentSize: Int64
        /// Most times the download discards its bytes and starts over before failing.
        var maximumRestarts = 3
    }

    /// What the owner does next.
    enum Action: Sendable, Equatable {
        /// Fetch the unfinished segments of the split download, then report
        /// ``segmentsCompleted()``, ``segmentsAbandoned(reason:rangesIgnored:)`` or
        /// ``failed(_:bytesOnDisk:cancelled:)``.
        case continueSegments
        /// Send a request for `plan`; with `discardFirst`, first invalidate the checkpoint
        /// and empty the file (its bytes belong to no version a range can continue).
        case send(ResumePlanner.RequestPlan, discardFirst: Bool)
        /// Announce the retry, checkpoint what is on disk, wait `delay` seconds, then ask
        /// ``next(bytesOnDisk:)``.
        case wait(attempt: Int, delay: TimeInterval, after: FerryError)
        /// Invalidate the checkpoint, empty the file and announce offset 0 (and one
        /// connection, with `reason` when ranges were ignored), then ask ``next(bytesOnDisk:)``.
        case startOver(reason: String, rangesIgnored: Bool)
        /// Every byte is on disk.
        case finish
        /// The download fails with this error; the owner keeps or discards its bytes.
        case fail(FerryError)
    }

    /// Whether a body written from the start is split across connections.
    enum Split: Sendable, Equatable {
        /// One connection: only one is wanted, or a server once ignored a range.
        case no
        /// More are wanted, but this response cannot be split, for the reason given.
        case refused(String)
        /// Split as the plan says, every segment checked against `validator`: make the run,
        /// report ``splitStarted()``, fetch.
        case into(SegmentPlan, validator: Validator)
    }

    let configuration: Configuration
    /// What the bytes on disk are and what to ask for next.
    private(set) var planner: ResumePlanner
    private(set) var retry: RetryBudget
    /// Times the download discarded its bytes and started over.
    private(set) var restarts = 0
    /// Whether the download is split across connections now.
    private(set) var isSplit: Bool
    /// A server ignored a range: never split again.
    private(set) var singleConnection = false

    /// - Parameters:
    ///   - planner: The planner, with what resume data says is on disk.
    ///   - retry: The retry budget (the task's or the session's policy).
    ///   - configuration: Connections and limits.
    ///   - resumedSplit: The download continues segments that resume data recorded.
    init(planner: ResumePlanner, retry: RetryBudget, configuration: Configuration, resumedSplit: Bool = false) {
        self.planner = planner
        self.retry = retry
        self.configuration = configuration
        self.isSplit = resumedSplit
    }

    /// What to do now, with `bytesOnDisk` in the partial file.
    mutating func next(bytesOnDisk: Int64) -> Action {
        if isSplit { return .continueSegments }
        let plan = planner.nextRequest()
        let discard = plan == .full && bytesOnDisk > 0
        if discard { planner.reset() }
        return .send(plan, discardFirst: discard)
    }

    /// A response head arrived for `plan`: the planner's judgement of it, before a byte of
    /// its body is written. The owner performs it: on `.fail`, a status error is read with
    /// its body (`error.reason.statusCode` is set) and any other is thrown after the body
    /// is drained; on `.restart`, it drains the body, empties the file, then asks
    /// ``restarted()``; on `.writeFromStart`, it asks ``split(_:length:)`` how to write it.
    mutating func responseArrived(
        _ head: HTTPResponse,
        for plan: ResumePlanner.RequestPlan
    )
        -> ResumePlanner.ResponseAction
    {
        let action = planner.evaluate(head, for: plan)
        if case .restart = action { planner.reset() }
        return action
    }

    /// The owner emptied the file after a `.restart` answer: ask again from byte 0, which
    /// counts as a restart.
    mutating func restarted() -> Action { askAgain(bytesOnDisk: 0) }

    /// The first response's body is being split across connections.
    mutating func splitStarted() { isSplit = true }

    /// A body written from the start ended with `end` bytes on disk (as many as announced).
    mutating func wroteFromStart(upTo end: Int64) -> Action {
        planner.recordWritten(upTo: end)
        return .finish
    }

    /// A range's body ended with `end` bytes on disk (all it promised): finished, or ask for
    /// the rest (a short 206, or a total still unknown).
    mutating func wroteRange(upTo end: Int64) -> Action {
        planner.recordWritten(upTo: end)
        return planner.isComplete ? .finish : askAgain(bytesOnDisk: end)
    }

    /// Every segment of the split download is written.
    mutating func segmentsCompleted() -> Action {
        if let total = planner.partial.totalLength { planner.recordWritten(upTo: total) }
        return .finish
    }

    /// A request or its body failed with `error`, leaving `bytesOnDisk` (for one connection:
    /// a prefix of the file that the planner continues). `cancelled`: the transfer's Swift
    /// task was cancelled.
    mutating func failed(_ error: FerryError, bytesOnDisk: Int64, cancelled: Bool) -> Action {
        if !isSplit { planner.recordWritten(upTo: bytesOnDisk) }
        switch retry.decide(after: error, cancelled: cancelled) {
        case .giveUp: return .fail(error)
        case .retry(let attempt, let delay): return .wait(attempt: attempt, delay: delay, after: error)
        }
    }

    /// A file changed between segments, or the server ignored a range: start over from
    /// byte 0, on one connection if ranges were ignored.
    mutating func segmentsAbandoned(reason: String, rangesIgnored: Bool) -> Action {
        if let failure = countRestart() { return failure }
        planner.reset()
        isSplit = false
        singleConnection = singleConnection || rangesIgnored
        return .startOver(reason: reason, rangesIgnored: rangesIgnored)
    }

    /// Records the bytes a failed download keeps (a split one: the written prefix).
    mutating func recordWritten(upTo end: Int64) { planner.recordWritten(upTo: end) }

    /// How a body written from the start (`length` bytes, if known) is written: on one
    /// connection, or split as the returned plan says.
    func split(_ head: HTTPResponse, length: Int64?) -> Split {
        guard configuration.connections > 1, !singleConnection else { return .no }
        if let refusal = Self.splitRefusal(
            head,
            length: length,
            validator: planner.partial.validator,
            minimumSegmentSize: configuration.minimumSegmentSize
        ) {
            return .refused(refusal)
        }
        // Without a refusal, both are known.
        guard let length, let validator = planner.partial.validator else { return .no }
        return .into(
            SegmentPlan(
                length: length,
                count: configuration.connections,
                minimumSize: configuration.minimumSegmentSize
            ),
            validator: validator
        )
    }

    // MARK: Private

    /// Asks for more after a response: a request from byte 0 counts as a restart.
    private mutating func askAgain(bytesOnDisk: Int64) -> Action {
        if planner.nextRequest() == .full, let failure = countRestart() { return failure }
        return next(bytesOnDisk: bytesOnDisk)
    }

    private mutating func countRestart() -> Action? {
        restarts += 1
        return restarts > configuration.maximumRestarts
            ? .fail(Self.tooManyRestarts(configuration.maximumRestarts)) : nil
    }

    /// Why a first response cannot be split; `nil` when it can.
    static func splitRefusal(
        _ head: HTTPResponse,
        length: Int64?,
        validator: Validator?,
        minimumSegmentSize minimum: Int64
    ) -> String? {
        guard let length else { return "the server did not announce the length" }
        guard validator != nil else {
            return "the response has no strong validator (ETag or Last-Modified): segments could mix two versions"
        }
        guard head.headers["Accept-Ranges"]?.lowercased().contains("bytes") == true else {
            return "the server does not announce byte ranges (Accept-Ranges: bytes)"
        }
        guard length >= 2 * minimum else { return "the file is smaller than two segments of \(minimum) bytes" }
        return nil
    }

    static func tooManyRestarts(_ maximum: Int) -> FerryError {
        FerryError(
            .badServerResponse,
            "Gave up after \(maximum) restarts: the server's answers to range requests do not fit together."
        )
    }
}
