package import CoreMetrics
package import Ferry
package import Foundation
package import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The service behind `ferry daemon`: owns the background tasks of every session, runs them
/// with Ferry's engine, and keeps their state in a ``BackgroundStore``.
///
/// ## Lifecycle and threading
/// ``start()`` requeues the tasks a previous run left `running` (it died: they continue from
/// their checkpoint with a range request) and starts what the scheduler allows; afterwards
/// every change (add, pause, resume, cancel, a transfer ending, an `earliestBeginDate`
/// passing) schedules again. An actor: requests from the socket API are serialized here.
package actor BackgroundDaemon {
    /// How the daemon runs.
    package struct Options: Sendable {
        package var stateDirectory: URL
        /// At most this many transfers at once.
        package var globalLimit = 8
        /// At most this many transfers per host at once.
        package var perHostLimit = 4
        /// Most bytes per second all transfers move together; `nil` for no limit.
        package var bytesPerSecond: Int64?
        /// Retries of transient failures per start, each resuming.
        package var retries = 5
        /// What the store keeps of finished tasks.
        package var retention = BackgroundStore.Retention()
        /// Where the daemon says what it does: each task's start, where it continues, its
        /// retries and its end at `info` (`warning` for trouble); the engine's own messages
        /// (request heads, resume decisions) at `debug`. Default: nothing.
        package var logger = Logger(label: "ferry.daemon", factory: { _ in SwiftLogNoOpLogHandler() })
        /// Where tasks' files may be (links resolved), judged again when a task's source is
        /// opened and when its file is moved into place; `nil`: anywhere.
        package var allowedDirectories: [URL]?
        /// Where the transfers' metrics go (the daemon's Prometheus registry); `nil`: nowhere.
        package var metricsFactory: (any MetricsFactory)?

        package init(stateDirectory: URL) { self.stateDirectory = stateDirectory }
    }

    package let store: BackgroundStore
    private let session: Session
    private let scheduler: BackgroundScheduler
    /// ``Options/allowedDirectories`` with links resolved, once.
    private let resolvedDirectories: [String]?
    private var running: [Int64: SessionTask] = [:]
    /// Why a running transfer is being stopped, when the daemon stops it.
    private var stopping: [Int64: BackgroundTaskRecord.State] = [:]
    /// The ends on their way into the store, who waits for them, and those it refused.
    private var ends = EndBook()
    private let retention: BackgroundStore.Retention
    private let logger: Logger
    /// When a process of each session last asked for its events: kept here, written to the
    /// store only when it prunes, so that polling never writes.
    private var attached: [String: Date] = [:]
    private var wake: Task<Void, Never>?
    /// Set by ``drain()``: no transfer starts any more.
    private var draining = false
    /// When the retention runs again after ends.
    private var pruning: PruneSchedule

    package init(options: Options) throws {
        store = try BackgroundStore(directory: options.stateDirectory)
        var configuration = SessionConfiguration.default
        configuration.downloadsDirectory = options.stateDirectory.appendingPathComponent("partials", isDirectory: true)
        configuration.resumeStore = ResumeStore(storage: store)
        configuration.retryPolicy = RetryPolicy(maximumRetries: options.retries)
        configuration.httpMaximumConnectionsPerHost = options.perHostLimit
        configuration.maximumBytesPerSecond = options.bytesPerSecond
        configuration.cookieStore = nil
        configuration.logger = options.logger
        configuration.metricsFactory = options.metricsFactory ?? NOOPMetricsHandler.instance
        session = try Session(configuration: configuration)
        scheduler = BackgroundScheduler(limit: options.globalLimit)
        resolvedDirectories = options.allowedDirectories.map(PathConfinement.resolved)
        retention = options.retention
        pruning = PruneSchedule(keeps: options.retention.maximumFinishedTasks)
        logger = options.logger
    }

    /// Picks up where the last run stopped, then schedules.
    package func start() throws {
        for task in try store.tasks(in: .running) {
            // Left `running` by the last run (not one a request started since this began).
            guard let id = task.id, running[id] == nil else { continue }
            logger.info("task \(id) was running when the last run stopped: queued again")
            try store.update(id) { $0.state = .queued }
        }
        prune()
        try schedule()
    }

    /// A process of `session` asked for its events.
    package func attach(_ session: String) { attached[session] = Date() }

    /// When each session was last attached, as far as this run knows.
    package var attachments: [String: Date] { attached }

    /// Applies the retention in bounded batches, and writes down when sessions were last
    /// attached. The batches run after this returns, one at a time, each a short
    /// transaction: requests are answered between them.
    private func prune() {
        pruning.pruned()
        guard !pruning.batchesRunning else { return }
        pruning.batchesRunning = true
        Task { await self.pruneInBatches() }
    }

    private func pruneInBatches() async {
        defer { pruning.batchesRunning = false }
        for (session, date) in attached { try? store.sessionAttached(session, at: date) }
        while true {
            do {
                guard try !store.prune(retention).complete else { return }
            } catch {
                logger.warning("the store could not forget finished tasks: \(error); trying again later")
                return
            }
            await Task.yield()
        }
    }

    /// `ferry clean`: removes every finished task (of `session`, or of all) now.
    package func clean(session: String?) throws -> Int {
        try store.removeFinished(session: session)
    }

    // MARK: Requests

    /// Queues a new task.
    package func add(_ task: BackgroundTaskRecord) throws -> BackgroundTaskRecord {
        let added = try store.insert(task)
        try schedule()
        return try store.task(added.id ?? 0) ?? added
    }

    /// Queues new tasks in one transaction (all or none), then schedules once; returns their
    /// ids, in order.
    package func add(_ tasks: [BackgroundTaskRecord]) throws -> [Int64] {
        let ids = try store.insert(tasks).compactMap(\.id)
        try schedule()
        return ids
    }

    /// Stops a queued or running task, keeping what it fetched.
    package func pause(_ id: Int64) async throws -> BackgroundTaskRecord? {
        await waitUntilEnded(id, whileRunning: false)
        guard let task = try store.task(id) else { return nil }
        switch task.state {
        case .queued:
            try store.update(id) { $0.state = .paused }
        case .running:
            // Answer with the state the pause left, not the one it found.
            await stop(id, leaving: .paused)
        default:
            break
        }
        return try store.task(id)
    }

    /// Stops running task `id` keeping what it fetched (a download's last checkpoint is
    /// written; a resumable upload keeps its upload resource, another starts over), and
    /// returns once its end, `state`, is recorded.
    private func stop(_ id: Int64, leaving state: BackgroundTaskRecord.State) async {
        guard let transfer = running[id] else { return }
        stopping[id] = state
        if let download = transfer as? DownloadTask {
            _ = await download.cancelProducingResumeData()
        } else if let upload = transfer as? UploadTask {
            _ = await upload.cancelProducingResumeData()
        } else {
            transfer.cancel()
        }
        await waitUntilEnded(id)
    }

    /// Stops every transfer for the daemon's own stop (SIGTERM): each writes its last
    /// checkpoint and is left `queued`, so that the next start continues it; nothing new
    /// starts from now on. Returns once every end is recorded.
    package func drain() async {
        draining = true
        wake?.cancel()
        wake = nil
        let ids = Array(running.keys)
        logger.notice("stopping: \(ids.count) running transfer(s) keep their bytes for the next start")
        await withTaskGroup(of: Void.self) { group in
            for id in ids { group.addTask { await self.stop(id, leaving: .queued) } }
        }
    }

    /// How many tasks are in each state, for the daemon's metrics and `ferry ls`: the
    /// store's counts (of `session`, or of all), with the tasks whose end it could not record
    /// shown failed.
    package func taskCounts(session: String? = nil) throws -> [BackgroundTaskRecord.State: Int] {
        reported(try store.counts(session: session), session: session)
    }

    /// `counts` (of `session`, or of all) as clients see them: see ``reported(_:)``.
    package func reported(
        _ counts: [BackgroundTaskRecord.State: Int],
        session: String?
    ) -> [BackgroundTaskRecord.State: Int] {
        guard !ends.unrecorded.isEmpty else { return counts }
        var counts = counts
        // Left running in the store: the end could not be written.
        for id in ends.unrecorded.keys {
            guard let task = try? store.task(id), !task.state.isFinal, session.map({ $0 == task.session }) ?? true
            else { continue }
            counts[task.state, default: 0] -= 1
            counts[.failed, default: 0] += 1
        }
        return counts.filter { $0.value > 0 }
    }

    /// Queues a paused or failed task again; it continues from its checkpoint.
    package func resume(_ id: Int64) async throws -> BackgroundTaskRecord? {
        await waitUntilEnded(id, whileRunning: false)
        guard let task = try store.task(id) else { return nil }
        if task.state == .paused || task.state == .failed {
            try store.update(id) {
                $0.state = .queued
                $0.errorMessage = nil
                $0.finishedAt = nil
            }
            try schedule()
        }
        return try store.task(id)
    }

    /// Ends a task that has not ended, discarding what it fetched.
    package func cancel(_ id: Int64) async throws -> BackgroundTaskRecord? {
        await waitUntilEnded(id, whileRunning: false)
        guard let task = try store.task(id) else { return nil }
        if let transfer = running[id] {
            stopping[id] = .canceled
            transfer.cancel()
        } else if !task.state.isFinal {
            if let resume = store.resumeData(for: task.resumeKey) { PartialFile.removeNamed(resume.partialFile) }
            try store.finish(id, as: .canceled, detail: nil)
        }
        return try store.task(id)
    }

    // MARK: Running

    private func schedule() throws {
        guard !draining else { return }
        // The head read alone: a schedule that starts nothing (an add with --start-after, a
        // full set of running tasks) writes nothing.
        let now = Date()
        let queued = try store.queueHead(now: now, free: max(0, scheduler.limit - running.count))
        let decision = scheduler.decide(queued: queued, running: running.count, now: now)
        launch(try store.start(decision.start), wakeAt: decision.wakeAt)
    }

    /// Starts in `batch` what the scheduler takes from the head of the queue at `now`
    /// (through its indexes: an add or an end costs the same with ten tasks stored or a
    /// million, BackgroundStore+Queue.swift); ``launch(_:wakeAt:)`` runs them once the
    /// batch is committed.
    private func startFromHead(
        _ batch: inout BackgroundStore.Batch,
        now: Date
    ) throws -> (tasks: [BackgroundTaskRecord], wakeAt: Date?) {
        guard !draining else { return ([], nil) }
        let queued = try batch.queueHead(now: now, free: max(0, scheduler.limit - running.count))
        let decision = scheduler.decide(queued: queued, running: running.count, now: now)
        return (try batch.start(decision.start), decision.wakeAt)
    }

    /// Runs the transfers of `started` (the store shows them running), and wakes the
    /// scheduler at `wakeAt`, the next earliest start.
    private func launch(_ started: [BackgroundTaskRecord], wakeAt: Date?) {
        for task in started {
            guard let id = task.id else { continue }
            do {
                try run(task, id: id)
            } catch {
                // Neither started nor recorded failed (the store refused): queued again,
                // for the next schedule.
                logger.warning("task \(id) could not start: \(error); queued again")
                try? store.setState(id, .queued)
            }
        }
        wake?.cancel()
        wake = wakeAt.map { date in
            Task { [weak self] in
                try? await Task.sleep(for: .seconds(max(0, date.timeIntervalSinceNow)))
                guard !Task.isCancelled else { return }
                try? await self?.schedule()
            }
        }
    }

    /// Starts the transfer of `record`, which the store already shows running; one that
    /// cannot start (not a URL, a path outside the allowed directories) is recorded failed.
    private func run(_ record: BackgroundTaskRecord, id: Int64) throws {
        guard let url = URL(string: record.url) else {
            try store.finish(id, as: .failed, detail: "'\(record.url)' is not a URL.")
            return
        }
        var request = URLRequest(url: url)
        for (name, value) in record.headers { request.setValue(value, forHTTPHeaderField: name) }
        let transfer: SessionTask
        if let resolvedDirectories,
            !PathConfinement.contains(
                resolved: resolvedDirectories,
                URL(fileURLWithPath: record.sourceFile ?? record.destination)
            )
        {
            try store.finish(
                id,
                as: .failed,
                detail:
                    "'\(record.sourceFile ?? record.destination)' no longer lies in a directory the daemon may use (a link changed since the task was added)."
            )
            return
        }
        if record.kind == .upload, let source = record.sourceFile {
            request.httpMethod = record.method ?? "POST"
            let upload = session.uploadTask(with: request, fromFile: URL(fileURLWithPath: source))
            // Continued from the server's offset after a pause, a failure or kill -9, when the
            // server offers resumable uploads.
            upload.resumeKey = record.resumeKey
            upload.resumesFromStore = true
            transfer = upload
        } else {
            let file = URL(fileURLWithPath: record.destination)
            let replacing: DownloadDestination.Options = [.removePreviousFile, .createIntermediateDirectories]
            let download = session.downloadTask(
                with: request,
                to: resolvedDirectories.map { .file(file, options: replacing, confinedTo: $0) }
                    ?? .file(file, options: replacing)
            )
            download.resumeKey = record.resumeKey
            download.resumesFromStore = true
            download.maximumConnections = record.connections
            download.checksum = record.checksum.flatMap { try? Checksum(parsing: $0) }
            transfer = download
        }
        running[id] = transfer
        if logger.logLevel <= .info {
            // A checkpoint writes its byte count to the row: none to look for without one.
            let checkpoint =
                record.bytesReceived > 0
                ? store.resumeData(for: BackgroundTaskRecord.resumeKey(for: id))?.bytesOnDisk ?? 0 : 0
            let held =
                checkpoint > 0
                ? " (a checkpoint holds \(checkpoint) bytes)"
                : record.bytesReceived > 0
                    ? " (no checkpoint of the \(record.bytesReceived) bytes seen: from byte 0)" : ""
            logger.info("task \(id) started: \(record.url) → \(record.destination)\(held)")
        }
        let events = transfer.events
        transfer.resume()
        let logger = self.logger
        Task { [weak self] in
            let upload = transfer is UploadTask
            for await event in events { Self.log(event, of: id, upload: upload, to: logger) }
            await self?.ended(id, transfer: transfer)
        }
    }

    /// Returns once `ended` has recorded the end of task `id`: of a running task
    /// (`whileRunning`) or of one whose transfer ended and whose end waits to be recorded;
    /// at once otherwise. A pause, a resume or a cancel waits for a pending end so as to act
    /// on the state it leaves, not on a `running` row whose transfer is gone.
    private func waitUntilEnded(_ id: Int64, whileRunning: Bool = true) async {
        let running = running[id] != nil
        guard (whileRunning && running) || (!running && ends.isRecording(id)) else { return }
        await withCheckedContinuation { ends.wait(for: id, $0) }
    }

    /// What the daemon's log says of a task's event: where it continues, its retries.
    private static func log(_ event: TaskEvent, of id: Int64, upload: Bool, to logger: Logger) {
        switch event {
        case .resumedAtOffset(let offset, let total):
            let of = total.map { " of \($0)" } ?? ""
            if upload {
                logger.info("task \(id) continues at byte \(offset)\(of): the server's offset")
            } else if offset > 0 {
                logger.info("task \(id) resumed at byte \(offset)\(of) (Range + If-Range accepted)")
            } else {
                logger.info("task \(id) starts from byte 0\(of): the bytes kept cannot be continued")
            }
        case .willRetry(let attempt, let delay, let error):
            logger.warning("task \(id): retry \(attempt) in \(delay) s after: \(error)")
        default:
            break
        }
    }

    /// Records the end of task `id`: with the others that ended meanwhile, and the starts
    /// they free, in one transaction (see ``BackgroundStore/Batch``).
    ///
    /// The first end of a group yields the actor once, so that the ends already waiting
    /// for it join the group; they return at once, and the first records them all.
    private func ended(_ id: Int64, transfer: SessionTask) async {
        running[id] = nil
        let end = EndBook.End(id: id, transfer: transfer, reason: stopping.removeValue(forKey: id))
        guard ends.add(end) else { return }
        await Task.yield()
        await record(ends.takePending())
    }

    /// Records `group` and starts what it frees in one transaction; when the store refuses
    /// it, records each end alone, trying again a few times (``EndBook/retryDelays``), then
    /// schedules. Every end's waiters are resumed once its end is recorded or given up.
    private func record(_ group: [EndBook.End]) async {
        let now = Date()
        do {
            let (messages, started) = try store.batch { batch in
                let messages = try group.map { end in try EndBook.write(end, in: &batch) }
                return (messages, try startFromHead(&batch, now: now))
            }
            for (end, message) in zip(group, messages) {
                logger.log(level: message.level, "\(message.text)")
                recorded(end.id)
            }
            launch(started.tasks, wakeAt: started.wakeAt)
        } catch {
            for end in group { await recordAlone(end) }
            try? schedule()
        }
    }

    /// Records one end, trying again while the store refuses it.
    private func recordAlone(_ end: EndBook.End) async {
        var attempt = 0
        while true {
            do {
                let message = try store.batch { batch in try EndBook.write(end, in: &batch) }
                logger.log(level: message.level, "\(message.text)")
                break
            } catch {
                // A locked or full store: say so, and try again; a task left `running` in the
                // store would keep `ferry wait` waiting for ever.
                let message = "the store could not record the end of task \(end.id): \(error)"
                logger.warning("\(message); retrying")
                guard attempt < EndBook.retryDelays.count else {
                    // Clients are told it failed, and why; the next start finds it `running`
                    // and queues it again.
                    for waiter in ends.settle(end.id, failure: "Failed: \(message).") { waiter.resume() }
                    return
                }
                try? await Task.sleep(for: EndBook.retryDelays[attempt])
                attempt += 1
            }
        }
        recorded(end.id)
    }

    /// Task `id`'s end is in the store: its waiters go on, and the retention runs when
    /// its ``PruneSchedule`` says so.
    private func recorded(_ id: Int64) {
        for waiter in ends.settle(id, failure: nil) { waiter.resume() }
        if pruning.taskEnded() { prune() }
    }

    /// `task` as clients see it: a task whose end the store could not record is shown
    /// failed, with the reason.
    package func reported(_ task: BackgroundTaskRecord) -> BackgroundTaskRecord {
        guard let id = task.id, let message = ends.unrecorded[id], !task.state.isFinal else { return task }
        var shown = task
        shown.state = .failed
        shown.errorMessage = message
        return shown
    }

    /// How far a running task is now (the store has the last checkpoint): bytes received by
    /// a download, bytes sent by an upload.
    package func liveProgress(_ id: Int64) -> (received: Int64, expected: Int64?)? {
        guard let transfer = running[id] else { return nil }
        if transfer is DataTask { return (transfer.countOfBytesSent, transfer.countOfBytesExpectedToSend) }
        return (transfer.countOfBytesReceived, transfer.countOfBytesExpectedToReceive)
    }
}
