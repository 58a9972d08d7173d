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
        if let resume, let reopened = PartialFile(resuming: resume.partialFile, keep: resume.bytesOnDisk) {
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
        do {
            while true {
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
                            request: request
                        )
                    }
                    switch step {
                    case .done:
                        break
                    case .again:
                        if planner.nextRequest() == .full {
                            restarts += 1
                            if restarts > Self.maximumRestarts {
                                throw FerryError(
                                    .badServerResponse,
                                    "Gave up after \(Self.maximumRestarts) restarts: the server's answers to range requests do not fit together."
                                )
                            }
                        }
                        continue
                    }
                    break
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
                    try await Task.sleep(for: .seconds(delay))
                }
            }
            try file.flush()
        } catch {
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
            delivered = try decodeIfAsked(file, head: head)
            if let checksum { try checksum.verify(delivered) }
            try delivered.finish()
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
        request: URLRequest
    ) async throws -> DownloadStep {
        let hadBytes = file.length > 0
        // Metadata describing the bytes on disk, as they were before this response.
        let previous = checkpoint(file, request: request, planner: planner)
        let action = planner.evaluate(head, for: plan)
        let checkpoint = checkpoint(file, request: request, planner: planner)
        switch action {
        case .fail(let error):
            // A status the download cannot use: its body never touches the partial file.
            if case .unacceptableStatusCode = error.reason { throw await statusError(head, body: body) }
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

    /// Says what the next request asks for: the whole body, or the rest from a byte offset.
    private func logPlan(_ plan: ResumePlanner.RequestPlan, bytesOnDisk: Int64) {
        switch plan {
        case .full:
            logger.debug("resume decision: the whole body", metadata: ["bytes-on-disk": "\(bytesOnDisk)"])
        case .range(let offset, let ifRange):
            logger.debug(
                "resume decision: a range",
                metadata: ["offset": "\(offset)", "if-range": "\(ifRange ?? "none")"]
            )
        }
    }

    /// Refuses a body announced larger than ``SessionConfiguration/maximumFileSize``
    /// before any of it is written.
    private func checkFileSize(_ size: Int64?, head: HTTPResponse) throws {
        guard let limit = configuration.maximumFileSize, let size, size > limit else { return }
        throw FerryError(
            .bodyTooLarge(limit: limit),
            "The file is \(size) bytes, more than the \(limit)-byte limit.",
            response: head
        )
    }

    /// The request for `plan`: `Range` and `If-Range` for a range, neither for a full
    /// request; `Accept-Encoding: identity` unless the request asks for a coding itself (a
    /// coded body is stored as it came, and never continued with a range).
    static func request(_ request: URLRequest, for plan: ResumePlanner.RequestPlan) -> URLRequest {
        var attempt = request
        if attempt.value(forHTTPHeaderField: "Accept-Encoding") == nil {
            attempt.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        }
        switch plan {
        case .full:
            attempt.setValue(nil, forHTTPHeaderField: "Range")
            attempt.setValue(nil, forHTTPHeaderField: "If-Range")
        case .range(let offset, let ifRange):
            attempt.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
            attempt.setValue(ifRange, forHTTPHeaderField: "If-Range")
        }
        return attempt
    }

    /// After a failure or cancel: keep the partial and attach resume data when its bytes can
    /// be continued (and the caller did not cancel without asking for resume data);
    /// otherwise remove it.
    private func keepOrDiscard(
        _ file: PartialFile,
        after error: FerryError,
        request: URLRequest,
        planner: ResumePlanner
    ) -> FerryError {
        var failure = error
        let cancelled = error.reason == .cancelled || task.isCanceling
        let resumable = planner.canResume(withChecksum: task.checksum != nil)
        let store = configuration.resumeStore
        let key = task.effectiveResumeKey
        var refused = error.reason == .checksumMismatch
        if case .bodyTooLarge = error.reason { refused = true }
        guard file.length > 0, resumable, !cancelled || task.producesResumeData, !refused else {
            file.discard()
            store?.remove(key)
            return failure
        }
        do {
            try file.finish()
            let resumeData = Self.resumeData(for: task, request: request, file: file, planner: planner)
            try file.writeMetadata(resumeData)
            try store?.save(resumeData, for: key)
            failure.resumeData = resumeData
        } catch {
            // New metadata cannot be written (a full disk, most often): the last good
            // checkpoint still describes a prefix of the bytes on disk, and is what a resume
            // continues from (it cuts the file back to that length).
            if let kept = lastCheckpoint(of: file) {
                failure.resumeData = kept
            } else {
                file.discard()
                store?.remove(key)
            }
        }
        return failure
    }

    /// The resume data last checkpointed for `file`, from the store or beside the file, when
    /// it still describes it.
    private func lastCheckpoint(of file: PartialFile) -> ResumeData? {
        let stored =
            configuration.resumeStore?.resumeData(for: task.effectiveResumeKey)
            ?? (try? Data(contentsOf: file.metadataURL)).flatMap { try? ResumeData(decoding: $0) }
        guard let stored, stored.partialFile.standardizedFileURL == file.url.standardizedFileURL,
            stored.bytesOnDisk > 0, stored.bytesOnDisk <= file.length
        else { return nil }
        return stored
    }

    /// Checkpoints for `file` as the planner knows it now; disabled when its bytes could not
    /// be resumed anyway (no strong validator).
    private func checkpoint(_ file: PartialFile, request: URLRequest, planner: ResumePlanner) -> Checkpoint {
        Checkpoint(
            file: file,
            template: Self.resumeData(for: task, request: request, file: file, planner: planner),
            enabled: planner.canResume(withChecksum: task.checksum != nil),
            store: configuration.resumeStore,
            key: task.effectiveResumeKey,
            logger: logger
        )
    }

    static func resumeData(
        for task: SessionTask,
        request: URLRequest,
        file: PartialFile,
        planner: ResumePlanner
    )
        -> ResumeData
    {
        ResumeData(
            originalURL: task.originalRequest.url ?? request.url ?? file.url,
            currentURL: request.url ?? file.url,
            method: request.method.rawValue,
            headers: (request.allHTTPHeaderFields ?? [:]).filter {
                !["range", "if-range", "accept-encoding"].contains($0.key.lowercased())
            },
            bytesOnDisk: file.length,
            totalLength: planner.partial.totalLength,
            validator: planner.partial.validator,
            partialFile: file.url
        )
    }
}

/// Events a download owes its observers once: the response head, and where it continues.
struct DownloadProgress {
    private var announcedResponse = false
    /// The next response continues bytes already on disk: say where.
    private var offsetPending: Bool

    init(resumed: Bool) { offsetPending = resumed }

    /// A retry is about to continue the download.
    mutating func willContinue() { offsetPending = true }

    mutating func announceResponse(_ head: HTTPResponse, task: SessionTask) {
        task.didReceive(response: head, announce: !announcedResponse)
        announcedResponse = true
    }

    /// Publishes `resumedAtOffset` for the first response after a resume or a retry, and
    /// whenever bytes on disk are discarded (`force`).
    mutating func announceOffset(_ offset: Int64, total: Int64?, task: SessionTask, force: Bool) {
        task.setDownloadPosition(offset, expected: total)
        guard force || offsetPending else { return }
        offsetPending = false
        task.publish(.resumedAtOffset(offset, expectedTotalBytes: total))
    }
}

/// Flushes the partial file, then writes resume data describing it (temp file + rename), so
/// that after a crash the metadata never claims bytes that are not on disk.
struct Checkpoint {
    static let interval: Duration = .seconds(1)
    static let bytes: Int64 = 4 << 20

    let file: PartialFile
    /// Everything but the byte count and the time.
    let template: ResumeData
    let enabled: Bool
    let store: ResumeStore?
    let key: String
    let logger: Logger

    func write() throws {
        guard enabled else { return }
        try file.flush()
        var resumeData = template
        resumeData.bytesOnDisk = file.length
        resumeData.createdAt = ResumeData.wholeSeconds(Date())
        try file.writeMetadata(resumeData)
        try store?.save(resumeData, for: key)
        logger.trace("checkpoint", metadata: ["bytes-on-disk": "\(resumeData.bytesOnDisk)"])
    }

    /// Removes the metadata (file and store entry), flushing the removal to stable storage,
    /// before the bytes it describes are discarded or replaced.
    func invalidate() throws {
        FileSystem.removeIfPresent(file.metadataURL)
        if let store {
            store.remove(key)
            if let directory = store.directory { FileSystem.syncDirectory(directory) }
        }
        FileSystem.syncDirectory(file.url.deletingLastPathComponent())
    }
}

/// Streams one response body into the partial file at an offset: skips bytes the server
/// repeated, refuses bytes past what the headers promised, reports progress, checkpoints.
struct BodyWriter {
    let file: PartialFile
    let task: SessionTask
    private var position: Int64
    private var skip: Int64
    private let limit: Int64?
    private(set) var written: Int64 = 0

    /// ``SessionConfiguration/maximumFileSize``: no byte is written past it.
    private let maximumFileSize: Int64?

    init(file: PartialFile, task: SessionTask, offset: Int64, skip: Int64, limit: Int64?, maximumFileSize: Int64?) {
        self.file = file
        self.task = task
        self.position = offset
        self.skip = skip
        self.limit = limit
        self.maximumFileSize = maximumFileSize
    }

    mutating func write(_ body: ResponseBody, checkpoint: Checkpoint?) async throws {
        var throttle = ProgressThrottle()
        var lastCheckpoint = (bytes: position, time: ContinuousClock.now)
        var iterator = body.makeAsyncIterator()
        while true {
            try await task.waitWhilePaused()
            guard let chunk = try await iterator.next() else { break }
            let count = try chunk.withUnsafeReadableBytes { bytes -> Int64 in
                var slice = bytes
                if skip > 0 {
                    let dropped = Int(min(skip, Int64(slice.count)))
                    slice = UnsafeRawBufferPointer(rebasing: slice[dropped...])
                    skip -= Int64(dropped)
                }
                if let limit, written + Int64(slice.count) > limit {
                    throw FerryError(.badServerResponse, "The server sent more bytes than its headers announced.")
                }
                if let maximumFileSize, position + Int64(slice.count) > maximumFileSize {
                    throw FerryError(
                        .bodyTooLarge(limit: maximumFileSize),
                        "The file grows past the \(maximumFileSize)-byte limit."
                    )
                }
                try file.write(slice, at: position)
                return Int64(slice.count)
            }
            position += count
            written += count
            let due = throttle.add(count)
            task.didWrite(bytes: count, publish: due != nil, unpublished: due ?? 0)
            if let checkpoint,
                position - lastCheckpoint.bytes >= Checkpoint.bytes
                    || ContinuousClock.now - lastCheckpoint.time >= Checkpoint.interval
            {
                try checkpoint.write()
                lastCheckpoint = (position, .now)
            }
        }
        if let rest = throttle.flush() { task.didWrite(bytes: 0, publish: true, unpublished: rest) }
    }
}
