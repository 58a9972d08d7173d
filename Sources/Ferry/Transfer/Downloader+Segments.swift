import Foundation
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A download split across connections (``SessionConfiguration/maximumConnectionsPerDownload``):
/// segments of one partial file fetched at once with `Range` + `If-Range`, each checked
/// against the first response's validator and length, written at their offsets, rebalanced
/// as they finish, and checkpointed together.
extension Downloader {
    /// A file changed between segments, or the server ignored a range: the segments cannot
    /// be put together, and the download starts over (with one connection when ranges are
    /// ignored). An answer for the machine (``DownloadStateMachine/segmentsAbandoned(reason:rangesIgnored:)``),
    /// returned, not thrown: only failures are errors.
    struct SegmentsAbandoned: Equatable {
        let reason: String
        let rangesIgnored: Bool
    }

    /// What a segment's answer allows.
    private enum SegmentAnswer {
        /// Write its body up to this end (exclusive), the end of the bytes its `206` promises.
        case promises(end: Int64)
        /// Stop every segment: the pieces cannot be put together.
        case abandon(SegmentsAbandoned)
    }

    /// A split download's run over `file`, recording its plan in checkpoints.
    func makeSegmentRun(
        _ plan: SegmentPlan,
        validator: Validator,
        file: PartialFile,
        request: URLRequest,
        planner: ResumePlanner
    ) throws -> SegmentRun {
        let writer = try SegmentWriter(file)
        return SegmentRun(
            plan: plan,
            validator: validator,
            writer: writer,
            record: checkpoint(file, request: request, planner: planner).segmentRecorder(writer)
        )
    }

    /// Fetches every unfinished segment of `run` over up to ``TransferOptions/connections``
    /// connections; `first` is the segment the first response's body already serves. Returns
    /// `nil` once every byte is written, or why the pieces cannot be put together (the other
    /// connections are cancelled); throws the first connection's failure (the others are
    /// cancelled, the plan keeps what each wrote).
    ///
    /// The transfer's own slot in the per-host limit always serves one connection, so the
    /// download moves whatever the limit and however it started (a first response, or resume
    /// data). Each further connection first waits for a slot of its own and only then takes
    /// a segment, so no segment waits behind a slot; those still waiting when every byte is
    /// written are called off.
    func fetchSegments(
        _ run: SegmentRun,
        request: URLRequest,
        first: (start: Int64, body: ResponseBody)?
    ) async throws -> SegmentsAbandoned? {
        let connections = options.connections
        // A new round: segments a failed round's connections worked on are free again.
        run.releaseClaims()
        if let first { run.claimFirst(first.start) }
        let abandoned = try await withThrowingTaskGroup(of: SegmentsAbandoned?.self) {
            group -> SegmentsAbandoned? in
            for connection in 0..<connections {
                group.addTask {
                    // Connection 0 is the transfer's own slot; each further one waits for its
                    // own before it takes a segment.
                    try await self.transfer.lease.forConnection(connection) { lease in
                        try await self.segmentWorker(
                            run,
                            request: request,
                            first: connection == 0 ? first : nil,
                            lease: lease,
                            slotFirst: connection != 0
                        )
                    }
                }
            }
            for try await ended in group {
                if let ended {
                    // The others' cancellations are awaited, and not failures.
                    group.cancelAll()
                    return ended
                }
                if run.plan.isComplete { group.cancelAll() }
            }
            return nil
        }
        if let abandoned { return abandoned }
        try run.checkpoint(force: true)
        // Every connection stopped; only a plan with every byte written is a finished file.
        guard run.plan.isComplete else {
            throw FerryError(.network, "The connections ended before every segment was complete.")
        }
        return nil
    }

    /// One connection's work: its first segment, then any unclaimed one, then half of the
    /// largest one left, until nothing is left to split. With `slotFirst`, it waits for a
    /// slot before it takes a segment. Once every byte is written, an error (the
    /// cancellation of a connection no longer needed) is no failure. Returns why the segments
    /// were abandoned, if an answer said so.
    private func segmentWorker(
        _ run: SegmentRun,
        request: URLRequest,
        first: (start: Int64, body: ResponseBody)?,
        lease: HostLimiter.Lease,
        slotFirst: Bool = false
    ) async throws -> SegmentsAbandoned? {
        do {
            if slotFirst, let url = request.url { try await lease.hold(Origin(url)) }
            if let first {
                try await writeSegment(first.start, of: run, from: first.body, promisedEnd: run.length)
            }
            // The first response's segment, if its body ended early; then any other.
            var current = first?.start ?? run.claim()
            while let start = current {
                defer { current = run.claim() }
                while let (next, end) = run.position(of: start), next < end {
                    var attempt = Self.request(request, for: .range(from: next, ifRange: run.validator.headerValue))
                    attempt.setValue("bytes=\(next)-\(end - 1)", forHTTPHeaderField: "Range")
                    let abandoned = try await transfer.open(attempt, body: nil, lease: lease).read {
                        body,
                        head -> SegmentsAbandoned? in
                        switch try await self.check(head, body: body, asked: next, of: run) {
                        case .abandon(let abandoned):
                            return abandoned
                        case .promises(let promisedEnd):
                            try await self.writeSegment(start, of: run, from: body, promisedEnd: promisedEnd)
                            return nil
                        }
                    }
                    if let abandoned { return abandoned }
                }
            }
        } catch  where run.plan.isComplete {
            return nil
        }
        return nil
    }

    /// A segment's `206` is judged as any range answer is (``ResumePlanner/judgeRange(_:from:validator:totalLength:)``),
    /// and must start exactly where it was asked to; a `200` means the file changed
    /// (`If-Range` failed) or ranges are ignored; a malformed `206` or any other status is
    /// the download's error (thrown), as on one connection. Returns the end (exclusive) of the bytes the `206` promises, or why the
    /// segments are abandoned.
    private func check(
        _ head: HTTPResponse,
        body: ResponseBody,
        asked next: Int64,
        of run: SegmentRun
    ) async throws -> SegmentAnswer {
        switch head.statusCode {
        case 206:
            switch ResumePlanner.judgeRange(head, from: next, validator: run.validator, totalLength: run.length) {
            case .continues(0, let length, _):
                // A split download continued from resume data has no first response of its
                // own: the first segment's answer is the task's response.
                if run.takeFirstAnswer(head) { task.client.didReceive(response: head) }
                return .promises(end: next + length)
            case .continues, .misplaced:
                return .abandon(
                    SegmentsAbandoned(reason: "a segment's 206 does not start at byte \(next)", rangesIgnored: true)
                )
            case .malformed(let message):
                // As on one connection: a 206 that contradicts itself is the download's error.
                throw FerryError(.badServerResponse, message, response: head)
            case .coded:
                return .abandon(SegmentsAbandoned(reason: "a segment's 206 is content-coded", rangesIgnored: true))
            case .otherVersion:
                return .abandon(Self.changed("the file changed while its segments were fetched"))
            }
        case 200:
            switch ResumePlanner.wholeAnswer(head, toRangeOf: run.validator) {
            case .serverIgnoredRange:
                return .abandon(
                    SegmentsAbandoned(reason: "the server answered a range with the whole file", rangesIgnored: true)
                )
            default:
                return .abandon(Self.changed("the file changed while its segments were fetched"))
            }
        case 416:
            return .abandon(Self.changed("the file changed (a segment's range is past its end)"))
        default:
            throw await FerryError.unacceptableStatus(head, body: body)
        }
    }

    /// The segments abandoned because the file is not the one they were cut from.
    private static func changed(_ reason: String) -> SegmentsAbandoned {
        SegmentsAbandoned(reason: reason, rangesIgnored: false)
    }

    /// Writes the body into the segment starting at `start`, from its `next` up to its end
    /// (which a split may move while the body arrives), then stops reading. A body that ends
    /// before the bytes its response promised (`promisedEnd`, exclusive) that the segment
    /// still needs is an error, as a short body is on one connection: asking again at once
    /// would flood a server that keeps answering so.
    private func writeSegment(
        _ start: Int64,
        of run: SegmentRun,
        from body: ResponseBody,
        promisedEnd: Int64
    ) async throws {
        var meter = ProgressMeter(task: task, direction: .written)
        defer { meter.finish() }
        var iterator = body.makeAsyncIterator()
        var received: Int64 = 0
        while true {
            try await task.client.waitWhilePaused()
            guard let chunk = try await iterator.next() else {
                guard let (next, end) = run.position(of: start), next < min(end, promisedEnd) else { return }
                throw FerryError(
                    .badServerResponse,
                    "A segment's response ended after \(received) bytes, before byte \(min(end, promisedEnd)) it promised."
                )
            }
            received += Int64(chunk.readableBytes)
            guard let (next, end) = run.position(of: start), next < end else { return }
            let count = min(Int64(chunk.readableBytes), end - next)
            try chunk.withUnsafeReadableBytes { bytes in
                try run.writer.write(UnsafeRawBufferPointer(rebasing: bytes[..<Int(count)]), at: next)
            }
            let taken = run.advance(start, by: count)
            meter.add(taken)
            try run.checkpoint(force: false)
            if count < Int64(chunk.readableBytes) || next + count >= end { return }
        }
    }
}

/// The segments of one download being fetched at once: the plan behind one lock, which
/// connection works on which segment, and the checkpoints that record them.
///
/// Thread-safe: connections call it from their own Swift tasks.
final class SegmentRun: Sendable {
    private struct State {
        /// The response the download's head is: the first response's, or, continued from
        /// resume data, the first segment's answer.
        var answer: HTTPResponse?
        var plan: SegmentPlan
        /// Segments a connection is working on.
        var claimed: Set<Int64> = []
        var lastCheckpoint: (written: Int64, time: ContinuousClock.Instant)
    }

    let length: Int64
    let validator: Validator
    let writer: SegmentWriter
    private let state: Mutex<State>
    /// Writes resume data describing `plan` (flushing the file first).
    private let record: @Sendable (SegmentPlan) throws -> Void

    init(
        plan: SegmentPlan,
        validator: Validator,
        writer: SegmentWriter,
        record: @escaping @Sendable (SegmentPlan) throws -> Void
    ) {
        self.length = plan.length
        self.validator = validator
        self.writer = writer
        self.record = record
        self.state = Mutex(State(plan: plan, lastCheckpoint: (plan.written, .now)))
    }

    var plan: SegmentPlan { state.withLock { $0.plan } }

    /// Forgets which connection worked on which segment (they have all stopped).
    func releaseClaims() {
        state.withLock { $0.claimed = [] }
    }

    /// Records `head` as the download's response if none is yet; whether it was (for the
    /// first caller only: whose answer becomes the task's response).
    func takeFirstAnswer(_ head: HTTPResponse) -> Bool {
        state.withLock { state in
            guard state.answer == nil else { return false }
            state.answer = head
            return true
        }
    }

    /// The download's response: the first response's head, or the first segment's answer.
    var answer: HTTPResponse? { state.withLock { $0.answer } }

    /// Marks the segment starting at `start` as served by the first response.
    func claimFirst(_ start: Int64) {
        state.withLock { _ = $0.claimed.insert(start) }
    }

    /// An unfinished segment no connection works on, or a new one split off the largest.
    func claim() -> Int64? {
        state.withLock { state in
            if let free = state.plan.unfinished.first(where: { !state.claimed.contains($0) }) {
                state.claimed.insert(free)
                return free
            }
            guard let split = state.plan.split() else { return nil }
            state.claimed.insert(split)
            return split
        }
    }

    func position(of start: Int64) -> (next: Int64, end: Int64)? {
        state.withLock { $0.plan.position(of: start) }
    }

    func advance(_ start: Int64, by count: Int64) -> Int64 {
        state.withLock { $0.plan.advance(start, by: count) }
    }

    /// Records the plan when a checkpoint is due (every ``Checkpoint/bytes`` or
    /// ``Checkpoint/interval``), or now with `force`. One connection records at a time; the
    /// plan is taken before the file is flushed, so the record never claims a byte that is
    /// not on disk.
    func checkpoint(force: Bool) throws {
        let due: SegmentPlan? = state.withLock { state in
            let written = state.plan.written
            guard
                force || written - state.lastCheckpoint.written >= Checkpoint.bytes
                    || ContinuousClock.now - state.lastCheckpoint.time >= Checkpoint.interval
            else { return nil }
            state.lastCheckpoint = (written, .now)
            return state.plan
        }
        if let due { try record(due) }
    }
}

/// Positioned writes into a partial file from several connections at once, through a
/// descriptor of its own (`pwrite(2)` is safe to call concurrently on distinct ranges).
final class SegmentWriter: Sendable {
    private let descriptor: Int32
    private let path: String

    init(_ file: PartialFile) throws {
        self.descriptor = try file.duplicateDescriptor()
        self.path = file.path
    }

    deinit { close(descriptor) }

    /// Flushes the file's data to stable storage.
    func flush() throws {
        guard fsync(descriptor) == 0 || errno == EINVAL else { throw FileSystem.error("Cannot flush '\(path)'") }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let result = pwrite(descriptor, base + done, bytes.count - done, off_t(offset) + off_t(done))
            if result < 0 {
                if errno == EINTR { continue }
                throw FileSystem.error("Cannot write '\(path)'")
            }
            done += result
        }
    }
}
