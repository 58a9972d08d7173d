import AsyncHTTPClient
import Foundation
import Logging
import NIOCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One download, driven over its ``Transfer``: the partial file, the resume data it
/// continues, the ``DownloadStateMachine`` whose actions it performs, the segments of a
/// split download, the output written in order, and the finished file's checks.
///
/// A value made by the transfer for its download plan; it uses the transfer for what every
/// plan shares (the request loop, the connection slot, the errors) and keeps the
/// download's own work in its files: `Downloader.swift` (the loop), `+Segments` (split
/// downloads), `+State` (checkpoints, keep or discard), `+InOrder` (outputs written in
/// order).
struct Downloader: TransferPart {
    let transfer: Transfer
    /// The download's entry in the session's resume store, named once for every claim, read,
    /// checkpoint and removal.
    let stored: ResumeStore.Slot?

    init(transfer: Transfer) {
        self.transfer = transfer
        stored = transfer.configuration.resumeStore?.slot(for: transfer.options.resumeKey)
    }
}

extension Downloader {
    /// Downloads into a partial file, continuing from resume data if there is any, asking
    /// for the rest after short answers, retrying transient failures by resuming, and
    /// checkpointing so that a crash loses at most one checkpoint interval.
    ///
    /// The decisions are a ``DownloadStateMachine``'s; this function performs its actions
    /// (sends, writes, waits, discards) and tells it what happened.
    func download(delivery: DownloadDelivery, resume explicitResume: ResumeData?) async throws -> TaskOutcome {
        if case .destination(let destination) = delivery, let output = try SequentialOutput.make(for: destination) {
            return try await download(inOrderTo: output)
        }
        var claim: DestinationLock?
        if case .destination(let destination) = delivery, let target = destination.fixedPath {
            claim = try DestinationLock(
                destinationPath: target,
                createDirectories: destination.options.contains(.createIntermediateDirectories)
            )
        }
        // Without a fixed destination, two downloads of one key (two `ferry get -c -O` of a
        // URL) would continue the same partial file: the key is claimed instead.
        if claim == nil, let stored, let entry = stored.file {
            claim = try DestinationLock(destination: entry, description: "The download of '\(stored.key)'")
        }
        // The name a server chose, once it is known.
        var nameClaim: DestinationLock?
        defer {
            claim?.release()
            nameClaim?.release()
        }
        var resume = explicitResume
        if resume == nil, let stored, let found = stored.resumeData() {
            if options.resumesFromStore {
                resume = found
            } else {
                // Start over: the earlier partial for this key is not wanted.
                PartialFile.removeNamed(found.partialFile)
                stored.remove()
            }
        }
        var request = task.originalRequest
        let checksum = options.checksum
        let allowUnvalidated = configuration.allowsUnvalidatedResume || checksum != nil
        var planner = ResumePlanner(allowUnvalidatedResume: allowUnvalidated)
        let file: PartialFile
        if let resume,
            let reopened = PartialFile(
                resuming: resume.partialFile,
                keep: resume.partialFileLength,
                // Killed in this boot: what it wrote after its last checkpoint is still there.
                orAsMuchAs: resume.keepsWrittenBytes ? resume.totalLength ?? .max : nil
            )
        {
            file = reopened
            planner = ResumePlanner(
                partial: .init(
                    bytesOnDisk: resume.segments == nil ? reopened.length : resume.bytesOnDisk,
                    totalLength: resume.totalLength,
                    validator: resume.validator
                ),
                allowUnvalidatedResume: allowUnvalidated
            )
        } else {
            file = try PartialFile(inDirectoryAt: configuration.downloadsDirectoryPath)
        }
        var progress = DownloadProgress(resumed: resume != nil)
        // A split download in progress: its segments are continued rather than the planner's
        // one range.
        var segments: SegmentRun?
        if let resume, let recorded = resume.segments, let total = resume.totalLength, let validator = resume.validator,
            planner.nextRequest() != .full,
            let plan = SegmentPlan(length: total, minimumSize: configuration.minimumSegmentSize, segments: recorded)
        {
            segments = try makeSegmentRun(plan, validator: validator, file: file, request: request, planner: planner)
            progress.announceOffset(plan.written, total: total, task: task, force: false)
        }
        var machine = DownloadStateMachine(
            planner: planner,
            retry: RetryBudget(policy: options.retryPolicy),
            configuration: .init(
                connections: options.connections,
                minimumSegmentSize: configuration.minimumSegmentSize
            ),
            resumedSplit: segments != nil
        )
        do {
            var action = machine.next(bytesOnDisk: file.length)
            loop: while true {
                switch action {
                case .continueSegments:
                    guard let run = segments else {
                        throw FerryError(.badServerResponse, "A split download lost its segments.")
                    }
                    do {
                        let abandoned = try await fetchSegments(run, request: request, first: nil)
                        action = Self.segmentsEnded(abandoned, machine: &machine)
                    } catch {
                        action = reaction(to: error, of: &machine, bytesOnDisk: file.length)
                    }
                case .send(let plan, let discardFirst):
                    logPlan(plan, bytesOnDisk: file.length)
                    if discardFirst {
                        try checkpoint(file, request: request, planner: machine.planner).invalidate()
                        try file.truncate(to: 0)
                    }
                    let response: FinalResponse
                    do {
                        response = try await transfer.open(Self.request(request, for: plan), body: nil)
                    } catch {
                        action = reaction(to: error, of: &machine, bytesOnDisk: file.length)
                        continue loop
                    }
                    // Later requests go straight to where the resource was found (its identity
                    // is its validator and length, not its URL), carrying what a redirect
                    // carries there: at another origin, none of the credentials that were
                    // given for the first one.
                    request = RedirectPlan.request(task.originalRequest, pointedAt: response.head.url)
                    do {
                        if nameClaim == nil, response.head.isSuccess, case .destination(let destination) = delivery {
                            nameClaim = try Self.claimChosenName(destination, file: file, head: response.head)
                        }
                        action = try await handle(
                            response.head,
                            body: response.body,
                            plan: plan,
                            machine: &machine,
                            file: file,
                            progress: &progress,
                            request: request,
                            segments: &segments
                        )
                        response.close()
                    } catch {
                        response.close(failure: transfer.ferryError(from: error))
                        action = reaction(to: error, of: &machine, bytesOnDisk: file.length)
                    }
                case .wait(let attempt, let delay, let error):
                    try await transfer.waitToRetry(attempt: attempt, delay: delay, after: error) {
                        if let run = segments {
                            try? run.checkpoint(force: true)
                        } else {
                            progress.willContinue()
                            if file.length > 0 {
                                try? checkpoint(file, request: request, planner: machine.planner).write()
                            }
                        }
                    }
                    action = machine.next(bytesOnDisk: file.length)
                case .startOver(let reason, let rangesIgnored):
                    logger.debug("starting over", metadata: ["why": "\(reason)"])
                    try checkpoint(file, request: request, planner: machine.planner).invalidate()
                    try file.truncate(to: 0)
                    segments = nil
                    task.client.publish(.segments(1, reason: rangesIgnored ? reason : nil))
                    task.client.publish(.resumedAtOffset(0, expectedTotalBytes: nil))
                    task.client.setDownloadPosition(0, expected: nil)
                    action = machine.next(bytesOnDisk: 0)
                case .finish:
                    // The body is in: the origin's slot goes to the next task now, not after
                    // the flush, the decoding, the checksum, the delegate's turn with the file
                    // and the move (URLSession frees the connection when the body ends too).
                    transfer.stoppedSending()
                    break loop
                case .fail(let error):
                    throw error
                }
            }
            try await file.flushAside()
        } catch {
            if let plan = segments?.plan {
                machine.recordWritten(upTo: plan.contiguousPrefix)
                throw keepOrDiscard(
                    file,
                    after: transfer.ferryError(from: error),
                    request: request,
                    planner: machine.planner,
                    segments: plan
                )
            }
            machine.recordWritten(upTo: file.length)
            throw keepOrDiscard(
                file,
                after: transfer.ferryError(from: error),
                request: request,
                planner: machine.planner
            )
        }
        // The last response announced (after a restart, the one that wrote the bytes), or a
        // split download's continued from resume data, which only its segments answered.
        guard let head = progress.response ?? segments?.answer else {
            file.discard()
            throw FerryError(.badServerResponse, "The download completed without a response.")
        }
        // From here the bytes are complete: what follows (decoding, checksum) can only
        // refuse them, and a refused body is not worth keeping.
        var delivered = file
        do {
            // Flushed above (or, decoded, as it was written); verifying only reads it.
            delivered = try decodeIfAsked(file, head: head)
            if let checksum { try checksum.verify(delivered) }
            delivered.closeWithoutFlushing()
        } catch {
            file.discard()
            delivered.discard()
            stored?.remove()
            throw transfer.ferryError(from: error)
        }
        guard task.client.transferWillFinish() else {
            delivered.discard()
            throw CancellationError()
        }
        file.removeMetadata()
        stored?.remove()
        return try await Transfer.deliver(delivered.url, head: head, task: task, delivery: delivery, source: delivered)
    }

    /// What the machine says after a request, its body or a split's segments failed: a
    /// retry (resuming from the bytes on disk) or the end.
    private func reaction(
        to error: any Error,
        of machine: inout DownloadStateMachine,
        bytesOnDisk: Int64
    ) -> DownloadStateMachine.Action {
        machine.failed(transfer.ferryError(from: error), bytesOnDisk: bytesOnDisk, cancelled: Task.isCancelled)
    }

    /// The machine's answer to segments that ended: all written (`abandoned` is `nil`), or
    /// abandoned, to start over.
    private static func segmentsEnded(
        _ abandoned: SegmentsAbandoned?,
        machine: inout DownloadStateMachine
    ) -> DownloadStateMachine.Action {
        guard let abandoned else { return machine.segmentsCompleted() }
        return machine.segmentsAbandoned(reason: abandoned.reason, rangesIgnored: abandoned.rangesIgnored)
    }

    /// With ``SessionConfiguration/automaticDecompression``, the decoded body of a complete
    /// `gzip` or `deflate` download, in a new partial file beside it (the coded one is
    /// removed); otherwise `file` itself.
    private func decodeIfAsked(_ file: PartialFile, head: HTTPResponse) throws -> PartialFile {
        guard configuration.automaticDecompression, let coding = ContentDecoder.coding(of: head) else { return file }
        let decoded = try PartialFile(beside: file)
        do {
            try ContentDecoder.decode(
                file,
                coding: coding,
                into: decoded,
                maximumRatio: configuration.maximumDecompressionRatio,
                maximumSize: configuration.maximumFileSize
            )
            try decoded.flush()
        } catch {
            decoded.discard()
            throw error
        }
        file.discard()
        return decoded
    }

    /// For a destination named after the response (``DownloadDestination/directory(_:options:)``):
    /// claims the chosen name for the rest of the download, and refuses a name that exists
    /// when the destination may not replace it, before any byte is written.
    private static func claimChosenName(
        _ destination: DownloadDestination,
        file: PartialFile,
        head: HTTPResponse
    ) throws -> DestinationLock? {
        guard destination.fixedURL == nil else { return nil }
        let target = try destination.resolve(file.url, head)
        let targetPath = FileSystem.path(target)
        var info = stat()
        if !destination.options.contains(.removePreviousFile), targetPath.withCString({ lstat($0, &info) }) == 0 {
            throw FerryError(.destinationExists, "'\(targetPath)' already exists.", response: head)
        }
        let parent = FileSystem.splitPath(targetPath).directory
        if destination.options.contains(.createIntermediateDirectories) {
            try FileSystem.createDirectory(atPath: parent, mode: 0o755)
        } else if parent.withCString({ stat($0, &info) }) != 0 {
            // The move will say that the directory is missing.
            return nil
        }
        return try DestinationLock(destinationPath: targetPath)
    }

    /// One response: the machine judges its head, then its body is written (or refused);
    /// returns what the machine says to do next.
    private func handle(
        _ head: HTTPResponse,
        body: ResponseBody,
        plan: ResumePlanner.RequestPlan,
        machine: inout DownloadStateMachine,
        file: PartialFile,
        progress: inout DownloadProgress,
        request: URLRequest,
        segments: inout SegmentRun?
    ) async throws -> DownloadStateMachine.Action {
        let hadBytes = file.length > 0
        let decision = machine.responseArrived(head, for: plan)
        // Checkpoints describe the bytes as this response continues them; its `invalidate()`
        // removes whatever metadata describes the bytes on disk now, whichever version.
        let checkpoint = checkpoint(file, request: request, planner: machine.planner)
        switch decision {
        case .fail(let error):
            // A status the download cannot use: its body never touches the partial file.
            if error.reason.statusCode != nil { throw await FerryError.unacceptableStatus(head, body: body) }
            await body.drain()
            throw error
        case .restart(let reason):
            logger.debug(
                "the server's answer does not continue the bytes on disk: starting over",
                metadata: ["status": "\(head.statusCode)", "why": "\(reason)"]
            )
            await body.drain()
            try checkpoint.invalidate()
            try file.truncate(to: 0)
            if hadBytes { progress.announceOffset(0, total: nil, task: task, force: true) }
            return machine.restarted()
        case .complete:
            await body.drain()
            progress.announceResponse(head, task: task)
            return .finish
        case .writeFromStart(let expected, let restart):
            try BodyReader.SizeLimit.file(configuration.maximumFileSize)?.refuse(announced: expected, head: head)
            // The metadata stops describing the old bytes before any new byte is written:
            // after a crash it must never claim another version's bytes.
            if hadBytes { try checkpoint.invalidate() }
            try file.truncate(to: 0)
            progress.announceResponse(head, task: task)
            progress.announceOffset(0, total: expected, task: task, force: restart != nil && hadBytes)
            switch machine.split(head, length: expected) {
            case .no:
                break
            case .refused(let reason):
                task.client.publish(.segments(1, reason: reason))
            case .into(let plan, let validator):
                task.client.publish(.segments(plan.segments.count, reason: nil))
                logger.debug("splitting", metadata: ["segments": "\(plan.segments.count)"])
                // The whole length at once (sparse): segments write anywhere in it.
                try file.truncate(to: plan.length)
                let run = try makeSegmentRun(
                    plan,
                    validator: validator,
                    file: file,
                    request: request,
                    planner: machine.planner
                )
                _ = run.takeFirstAnswer(head)
                segments = run
                machine.splitStarted()
                let abandoned = try await fetchSegments(run, request: request, first: (start: 0, body: body))
                return Self.segmentsEnded(abandoned, machine: &machine)
            }
            var writer = BodyWriter(
                file: file,
                task: task,
                offset: 0,
                skip: 0,
                limit: expected,
                maximumFileSize: configuration.maximumFileSize
            )
            try await writer.write(body, checkpoint: checkpoint)
            if let expected, file.length < expected {
                throw FerryError(
                    .badServerResponse,
                    "The body ended after \(file.length) of \(expected) bytes.",
                    response: head
                )
            }
            return machine.wroteFromStart(upTo: file.length)
        case .writeRange(let offset, let skip, let length):
            logger.debug("continuing", metadata: ["offset": "\(offset)", "length": "\(length)"])
            try BodyReader.SizeLimit.file(configuration.maximumFileSize)?
                .refuse(announced: machine.planner.partial.totalLength, head: head)
            progress.announceResponse(head, task: task)
            progress.announceOffset(offset, total: machine.planner.partial.totalLength, task: task, force: false)
            var writer = BodyWriter(
                file: file,
                task: task,
                offset: offset,
                skip: skip,
                limit: length,
                maximumFileSize: configuration.maximumFileSize
            )
            try await writer.write(body, checkpoint: checkpoint)
            if writer.written < length {
                throw FerryError(
                    .badServerResponse,
                    "The 206 ended after \(writer.written) of the \(length) bytes its Content-Range promised.",
                    response: head
                )
            }
            return machine.wroteRange(upTo: file.length)
        }
    }
}
