import AsyncHTTPClient
import Foundation
import Logging
import NIOCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Transfer {
    /// What one response did for a download.
    enum DownloadStep: Sendable {
        /// Every byte is on disk.
        case done
        /// Ask again: the rest of a short 206, or from byte 0 after a restart.
        case again
    }

    /// Most times one task discards its partial and starts over before failing: a server
    /// that keeps changing the resource, or answers ranges inconsistently, gets no more.
    static let maximumRestarts = 3

    /// Downloads into a partial file, continuing from resume data if there is any, asking
    /// for the rest after short answers, retrying transient failures by resuming, and
    /// checkpointing so that a crash loses at most one checkpoint interval.
    func download(delivery: DownloadDelivery, resume explicitResume: ResumeData?) async throws -> TaskOutcome {
        if case .destination(let destination) = delivery, let output = try SequentialOutput.make(for: destination) {
            return try await download(inOrderTo: output)
        }
        var claim: DestinationLock?
        if case .destination(let destination) = delivery, let target = destination.fixedURL {
            if destination.options.contains(.createIntermediateDirectories) {
                try FileSystem.createDirectory(target.deletingLastPathComponent(), mode: 0o755)
            }
            claim = try DestinationLock(destination: target)
        }
        let store = configuration.resumeStore
        let key = task.effectiveResumeKey
        // Without a fixed destination, two downloads of one key (two `ferry get -c -O` of a
        // URL) would continue the same partial file: the key is claimed instead.
        if claim == nil, let directory = store?.directory, let store {
            claim = try DestinationLock(
                destination: store.fileURL(for: key, in: directory),
                description: "The download of '\(key)'"
            )
        }
        // The name a server chose, once it is known.
        var nameClaim: DestinationLock?
        defer {
            claim?.release()
            nameClaim?.release()
        }
        var resume = explicitResume
        if resume == nil, let store, let stored = store.resumeData(for: key) {
            if task.resumesFromStore {
                resume = stored
            } else {
                // Start over: the earlier partial for this key is not wanted.
                PartialFile.removeNamed(stored.partialFile)
                store.remove(key)
            }
        }
        var request = task.originalRequest
        let checksum = task.checksum
        let allowUnvalidated = configuration.allowsUnvalidatedResume || checksum != nil
        var planner = ResumePlanner(allowUnvalidatedResume: allowUnvalidated)
        let file: PartialFile
        if let resume, let reopened = PartialFile(resuming: resume.partialFile, keep: resume.partialFileLength) {
            file = reopened
            planner = ResumePlanner(
                partial: .init(
                    bytesOnDisk: resume.bytesOnDisk,
                    totalLength: resume.totalLength,
                    validator: resume.validator
                ),
                allowUnvalidatedResume: allowUnvalidated
            )
        } else {
            file = try PartialFile(in: configuration.downloadsDirectory)
        }
        let policy = task.retryPolicy ?? configuration.retryPolicy
        var retries = 0
        var restarts = 0
        var progress = DownloadProgress(resumed: resume != nil)
        // A split download in progress: its segments are continued rather than the planner's
        // one range. After a server ignored a range, the download keeps to one connection.
        var segments: SegmentRun?
        var singleConnection = false
        if let resume, let recorded = resume.segments, let total = resume.totalLength, let validator = resume.validator,
            planner.nextRequest() != .full,
            let plan = SegmentPlan(length: total, minimumSize: configuration.minimumSegmentSize, segments: recorded)
        {
            segments = try makeSegmentRun(plan, validator: validator, file: file, request: request, planner: planner)
            progress.announceOffset(plan.written, total: total, task: task, force: false)
        }
        /// The segments cannot be put together: start over (with one connection if ranges
        /// were ignored).
        func abandon(_ abandoned: SegmentsAbandoned) throws {
            try startOver(after: abandoned, file: file, request: request, planner: &planner, restarts: &restarts)
            (segments, singleConnection) = (nil, singleConnection || abandoned.rangesIgnored)
        }
        do {
            while true {
                if let run = segments {
                    do {
                        try await fetchSegments(run, request: request, first: nil)
                        break
                    } catch let abandoned as SegmentsAbandoned {
                        try abandon(abandoned)
                    } catch {
                        try await waitToContinue(run, after: error, retries: &retries, policy: policy)
                    }
                    continue
                }
                let plan = planner.nextRequest()
                logPlan(plan, bytesOnDisk: file.length)
                if plan == .full, file.length > 0 {
                    try checkpoint(file, request: request, planner: planner).invalidate()
                    try file.truncate(to: 0)
                    planner.reset()
                }
                let attempt = Self.request(request, for: plan)
                do {
                    let step: DownloadStep = try await send(attempt, body: nil) { body, head in
                        // Later requests go straight to where the resource was found (its
                        // identity is its validator and length, not its URL), carrying what a
                        // redirect carries there: at another origin, none of the credentials
                        // that were given for the first one.
                        request = RedirectPlan.request(task.originalRequest, pointedAt: head.url)
                        if nameClaim == nil, head.isSuccess, case .destination(let destination) = delivery {
                            nameClaim = try Self.claimChosenName(destination, file: file, head: head)
                        }
                        return try await handle(
                            head,
                            body: body,
                            plan: plan,
                            planner: &planner,
                            file: file,
                            progress: &progress,
                            request: request,
                            segments: &segments,
                            split: !singleConnection
                        )
                    }
                    switch step {
                    case .done:
                        break
                    case .again:
                        if planner.nextRequest() == .full {
                            restarts += 1
                            if restarts > Self.maximumRestarts { throw Self.tooManyRestarts }
                        }
                        continue
                    }
                    break
                } catch let abandoned as SegmentsAbandoned {
                    // The first response's body was being split when a segment found the
                    // file changed, or a range ignored.
                    try abandon(abandoned)
                } catch let error where segments != nil {
                    // A split download failed after its first response: the loop continues
                    // its segments (or gives up with them recorded).
                    if let run = segments {
                        try await waitToContinue(run, after: error, retries: &retries, policy: policy)
                    }
                } catch {
                    let failure = ferryError(from: error)
                    // Bytes written before the failure belong to the version the planner
                    // knows; they are kept and continued.
                    planner.recordWritten(upTo: file.length)
                    if Task.isCancelled || failure.reason == .cancelled { throw failure }
                    retries += 1
                    guard let delay = policy.delay(beforeRetry: retries, after: failure) else { throw failure }
                    logger.debug(
                        "retrying",
                        metadata: ["attempt": "\(retries)", "delay": "\(delay)", "error": "\(failure)"]
                    )
                    task.publish(.willRetry(attempt: retries, delay: delay, error: failure))
                    progress.willContinue()
                    if file.length > 0 { try? checkpoint(file, request: request, planner: planner).write() }
                    try await waitBeforeRetry(.seconds(delay))
                }
            }
            try file.flush()
        } catch {
            if let plan = segments?.plan {
                planner.recordWritten(upTo: plan.contiguousPrefix)
                throw keepOrDiscard(
                    file,
                    after: ferryError(from: error),
                    request: request,
                    planner: planner,
                    segments: plan
                )
            }
            planner.recordWritten(upTo: file.length)
            throw keepOrDiscard(file, after: ferryError(from: error), request: request, planner: planner)
        }
        guard let head = task.response else {
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
            store?.remove(key)
            throw ferryError(from: error)
        }
        guard task.transferWillFinish() else {
            delivered.discard()
            throw CancellationError()
        }
        FileSystem.removeIfPresent(file.metadataURL)
        store?.remove(key)
        return try await Self.deliver(delivered.url, head: head, task: task, delivery: delivery, source: delivered)
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
        var info = stat()
        if !destination.options.contains(.removePreviousFile), lstat(target.path, &info) == 0 {
            throw FerryError(.destinationExists, "'\(target.path)' already exists.", response: head)
        }
        let parent = target.deletingLastPathComponent()
        if destination.options.contains(.createIntermediateDirectories) {
            try FileSystem.createDirectory(parent, mode: 0o755)
        } else if stat(parent.path, &info) != 0 {
            // The move will say that the directory is missing.
            return nil
        }
        return try DestinationLock(destination: target)
    }

    /// One response: decide with the planner, then write (or refuse) its body.
    private func handle(
        _ head: HTTPResponse,
        body: ResponseBody,
        plan: ResumePlanner.RequestPlan,
        planner: inout ResumePlanner,
        file: PartialFile,
        progress: inout DownloadProgress,
        request: URLRequest,
        segments: inout SegmentRun?,
        split: Bool
    ) async throws -> DownloadStep {
        let hadBytes = file.length > 0
        // Metadata describing the bytes on disk, as they were before this response.
        let previous = checkpoint(file, request: request, planner: planner)
        let action = planner.evaluate(head, for: plan)
        let checkpoint = checkpoint(file, request: request, planner: planner)
        switch action {
        case .fail(let error):
            // A status the download cannot use: its body never touches the partial file.
            if error.reason.statusCode != nil { throw await statusError(head, body: body) }
            await drain(body)
            throw error
        case .restart:
            logger.debug(
                "the server's answer does not continue the bytes on disk: starting over",
                metadata: ["status": "\(head.statusCode)"]
            )
            await drain(body)
            try previous.invalidate()
            try file.truncate(to: 0)
            planner.reset()
            if hadBytes { progress.announceOffset(0, total: nil, task: task, force: true) }
            return .again
        case .complete:
            await drain(body)
            progress.announceResponse(head, task: task)
            return .done
        case .writeFromStart(let expected, let restart):
            try checkFileSize(expected, head: head)
            // The metadata stops describing the old bytes before any new byte is written:
            // after a crash it must never claim another version's bytes.
            if hadBytes { try previous.invalidate() }
            try file.truncate(to: 0)
            progress.announceResponse(head, task: task)
            progress.announceOffset(0, total: expected, task: task, force: restart != nil && hadBytes)
            if split, connectionsWanted > 1 {
                if let refusal = splitRefusal(head, length: expected, validator: planner.partial.validator) {
                    task.publish(.segments(1, reason: refusal))
                } else if let expected, let validator = planner.partial.validator {
                    let plan = SegmentPlan(
                        length: expected,
                        count: connectionsWanted,
                        minimumSize: configuration.minimumSegmentSize
                    )
                    task.publish(.segments(plan.segments.count, reason: nil))
                    logger.debug("splitting", metadata: ["segments": "\(plan.segments.count)"])
                    // The whole length at once (sparse): segments write anywhere in it.
                    try file.truncate(to: expected)
                    let run = try makeSegmentRun(
                        plan,
                        validator: validator,
                        file: file,
                        request: request,
                        planner: planner
                    )
                    segments = run
                    try await fetchSegments(run, request: request, first: (start: 0, body: body))
                    planner.recordWritten(upTo: expected)
                    return .done
                }
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
            planner.recordWritten(upTo: file.length)
            if let expected, file.length < expected {
                throw FerryError(
                    .badServerResponse,
                    "The body ended after \(file.length) of \(expected) bytes.",
                    response: head
                )
            }
            return .done
        case .writeRange(let offset, let skip, let length):
            logger.debug("continuing", metadata: ["offset": "\(offset)", "length": "\(length)"])
            try checkFileSize(planner.partial.totalLength, head: head)
            progress.announceResponse(head, task: task)
            progress.announceOffset(offset, total: planner.partial.totalLength, task: task, force: false)
            var writer = BodyWriter(
                file: file,
                task: task,
                offset: offset,
                skip: skip,
                limit: length,
                maximumFileSize: configuration.maximumFileSize
            )
            try await writer.write(body, checkpoint: checkpoint)
            planner.recordWritten(upTo: file.length)
            if writer.written < length {
                throw FerryError(
                    .badServerResponse,
                    "The 206 ended after \(writer.written) of the \(length) bytes its Content-Range promised.",
                    response: head
                )
            }
            if planner.isComplete { return .done }
            // A short 206 (fewer bytes than asked), or a total still unknown: ask for the rest.
            return .again
        }
    }
}
