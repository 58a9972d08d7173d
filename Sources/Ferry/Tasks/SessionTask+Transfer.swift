import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the transfer (and the background link) use of a task: its activity, queued state,
/// pause waiters, transactions, progress, events and completion, each member under the
/// task's one lock.
extension SessionTask {
    // MARK: Used by the transfer

    /// Waits while the task is suspended. Throws when the transfer is cancelled.
    func waitWhilePaused() async throws {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = storage.withLock { storage in
                    guard storage.machine.state == .paused, !Task.isCancelled else { return false }
                    storage.pauseWaiters.append(continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
        } onCancel: {
            let waiters = storage.withLock { storage in
                defer { storage.pauseWaiters = [] }
                return storage.pauseWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
        try Task.checkCancellation()
    }

    /// Cancels the running transfer's Swift task without cancelling the task itself: the
    /// transfer reports why (a timeout) and fails as it would after any error.
    func interruptTransfer() {
        storage.withLock { $0.transfer }?.cancel()
    }

    /// Takes over `other`'s running transfer, which has just received `response`.
    func adoptTransfer(of other: SessionTask, response: HTTPResponse) -> Bool {
        let handle = other.storage.withLock { $0.transfer }
        return storage.withLock { storage in
            guard storage.machine.adoptRunningTransfer() else { return false }
            storage.transfer = handle
            storage.startedAt = .now
            storage.lastActivity = .now
            publish(.resumed, in: &storage)
            storage.response = response
            storage.bytesExpectedToReceive = response.expectedBodyLength(forMethod: storage.currentRequest.method)
            publish(.response(response), in: &storage)
            return true
        }
    }

    /// Records that bytes moved now (for the idle timeout).
    func touch() { storage.withLock { $0.lastActivity = .now } }

    /// Marks the task as waiting (for a connection slot, or before a retry) or done waiting;
    /// waiting is not idleness.
    func setQueued(_ queued: Bool) {
        storage.withLock { storage in
            storage.queued = queued
            storage.lastActivity = .now
        }
    }

    /// When the idle and resource timeouts fall due; the idle one is `nil` while the task is
    /// suspended or waits for a connection slot.
    func timeoutDeadlines(
        idle: Duration,
        resource: Duration
    ) -> (idle: ContinuousClock.Instant?, resource: ContinuousClock.Instant) {
        storage.withLock { storage in
            let started = storage.startedAt ?? .now
            let idleDeadline = storage.machine.state == .paused || storage.queued ? nil : storage.lastActivity + idle
            return (idleDeadline, started + resource)
        }
    }

    func setCurrentRequest(_ request: URLRequest, redirectedBy response: HTTPResponse) {
        storage.withLock { storage in
            storage.currentRequest = request
            publish(.willRedirect(response: response, newRequest: request), in: &storage)
        }
    }

    /// The final response head arrived; `announce` publishes `.response` (a download that
    /// asks again publishes only its first).
    func didReceive(response: HTTPResponse, announce: Bool = true) {
        storage.withLock { storage in
            storage.response = response
            storage.bytesExpectedToReceive = response.expectedBodyLength(forMethod: storage.currentRequest.method)
            if announce { publish(.response(response), in: &storage) }
        }
    }

    /// A download continues at `bytes` of a representation of `expected` bytes.
    func setDownloadPosition(_ bytes: Int64, expected: Int64?) {
        storage.withLock { storage in
            storage.bytesReceived = bytes
            storage.bytesExpectedToReceive = expected
        }
    }

    /// For a background session's task: returns once the daemon has stored the task (from
    /// then on it runs whatever happens to this process), or throws the error the task
    /// completed with before that. Returns at once for other sessions' tasks.
    ///
    /// ```swift
    /// let task = session.downloadTask(with: url)
    /// task.resume()
    /// try await task.waitUntilInDaemon()
    /// exit(0)  // the download goes on in `ferry daemon`
    /// ```
    public func waitUntilInDaemon() async throws(FerryError) {
        guard session?.background != nil else { return }
        // Woken when the id is set or the task completes, whichever comes first.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let waits = storage.withLock { storage in
                guard storage.backgroundID == nil, storage.machine.publicState != .completed else { return false }
                storage.daemonWaiters.append(continuation)
                return true
            }
            if !waits { continuation.resume() }
        }
        let error = storage.withLock { $0.backgroundID == nil ? $0.error : nil }
        if let error { throw error }
    }

    /// A background task's bytes as the daemon reports them.
    func backgroundProgress(received: Int64, expected: Int64?) {
        let delta: Int64 = storage.withLock { storage in
            storage.bytesExpectedToReceive = expected ?? storage.bytesExpectedToReceive
            return max(0, received - storage.bytesReceived)
        }
        if delta > 0 { didMove(.written, bytes: delta, publish: true, unpublished: delta) }
    }

    var backgroundID: Int64? {
        get { storage.withLock { $0.backgroundID } }
        set {
            let waiters = storage.withLock { storage in
                storage.backgroundID = newValue
                defer { storage.daemonWaiters = [] }
                return storage.daemonWaiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Whether `cancel` was called (the transfer is stopping).
    var isCanceling: Bool {
        storage.withLock { if case .canceling = $0.machine.state { true } else { false } }
    }

    /// Whether the owner cancelled asking for resume data.
    var producesResumeData: Bool { storage.withLock { $0.producesResumeData } }

    /// Cancels, asking the transfer to keep its partial file and make resume data.
    func cancelKeepingPartial() {
        storage.withLock { $0.producesResumeData = true }
        cancel()
    }

    /// Counts received body bytes; publishes `data` when somebody listens.
    func didReceive(data buffer: UnsafeRawBufferPointer, publishData: Bool) {
        // Asked before the task's lock is taken: the session's lock is never taken inside it.
        let delegateWants = publishData && session?.delegate != nil
        storage.withLock { storage in
            storage.bytesReceived += Int64(buffer.count)
            storage.lastActivity = .now
            countReceivedForProgress(Int64(buffer.count), in: &storage)
            if publishData && (delegateWants || hasListeners(storage)) {
                publish(.data(Data(buffer)), in: &storage)
            }
        }
    }

    /// Which of a task's byte counters moves.
    enum ByteDirection: Sendable {
        /// Request body bytes the connection took (`sentBodyData`).
        case sent
        /// Response body bytes written to disk or memory (`wroteData`).
        case written
    }

    /// Counts `bytes` moved in `direction`; publishes the event when `publish` is set (the
    /// transfer coalesces these in time, see ``ProgressMeter``), covering `unpublished`.
    func didMove(_ direction: ByteDirection, bytes: Int64, publish shouldPublish: Bool, unpublished: Int64) {
        storage.withLock { storage in
            storage.lastActivity = .now
            let event: TaskEvent
            switch direction {
            case .sent:
                storage.bytesSent += bytes
                event = .sentBodyData(
                    bytesSent: unpublished,
                    totalBytesSent: storage.bytesSent,
                    totalBytesExpectedToSend: storage.bytesExpectedToSend
                )
            case .written:
                storage.bytesReceived += bytes
                event = .wroteData(
                    bytesWritten: unpublished,
                    totalBytesWritten: storage.bytesReceived,
                    totalBytesExpectedToWrite: storage.bytesExpectedToReceive
                )
            }
            if shouldPublish {
                publish(event, in: &storage)
                reportProgress(upload: direction == .sent, in: &storage)
            }
        }
    }

    func resetSentBytes() { storage.withLock { $0.bytesSent = 0 } }

    func publish(_ event: TaskEvent) {
        storage.withLock { publish(event, in: &$0) }
    }

    /// Publishes `event` and waits until the delegate has handled it (when there is one).
    func publishAndWaitForDelegate(_ event: TaskEvent) async {
        guard session?.delegate != nil else {
            publish(event)
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            storage.withLock { storage in
                for subscriber in storage.subscribers.values { subscriber.yield(event) }
                hub.publish(.task(self, event), done: continuation)
            }
        }
    }

    /// The transfer asks to commit to its outcome; `false` when a cancel came first.
    func transferWillFinish() -> Bool { storage.withLock { $0.machine.transferWillFinish() } }

    /// The transfer ended: completes the task unless it already completed.
    func transferDidFinish(error: FerryError?, outcome: TaskOutcome?) {
        let transferError = error
        let waiters: Completion? = storage.withLock { storage in
            guard case .complete(var error) = storage.machine.transferFinished(error: error) else { return nil }
            // A cancel's reason wins, but the resume data the stopped transfer made survives.
            if error != nil, error?.resumeData == nil { error?.resumeData = transferError?.resumeData }
            if error == nil { storage.outcome = outcome }
            return completeLocked(error: error, in: &storage)
        }
        if let waiters { didComplete(waiters: waiters) }
    }

    /// Waits for the completion and returns the error and outcome.
    func completion() async -> (FerryError?, TaskOutcome?) {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = storage.withLock { storage in
                if storage.machine.state == .completed { return true }
                storage.completionWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
        return storage.withLock { ($0.error, $0.outcome) }
    }

    /// Sets the handler called once when the task completes. A task that completed already
    /// (it failed as it was made: a missing file, an invalidated session) has it called now,
    /// in the session's delivery context, or on a task of its own once that context has
    /// ended with the session.
    func setCompletionHandler(_ handler: @escaping @Sendable (SessionTask, FerryError?) -> Void) {
        let completed: FerryError?? = storage.withLock { storage in
            guard storage.machine.state == .completed else {
                storage.completionHandler = handler
                return .none
            }
            return .some(storage.error)
        }
        guard case .some(let error) = completed else { return }
        let call: @Sendable () async -> Void = { handler(self, error) }
        if !hub.enqueue(call) { Task { await call() } }
    }

    /// The completion handler, taken: whoever takes it calls it, so it runs once.
    func takeCompletionHandler() -> (@Sendable (SessionTask, FerryError?) -> Void)? {
        storage.withLock { storage in
            defer { storage.completionHandler = nil }
            return storage.completionHandler
        }
    }

    var outcome: TaskOutcome? { storage.withLock { $0.outcome } }

    // MARK: Private

    func hasListeners(_ storage: Storage) -> Bool {
        !storage.subscribers.isEmpty || hub.hasSubscribers
    }

    func publish(_ event: TaskEvent, in storage: inout Storage) {
        for subscriber in storage.subscribers.values { subscriber.yield(event) }
        var needsDelivery = hub.hasDelegate
        if !needsDelivery, case .completed = event { needsDelivery = storage.completionHandler != nil }
        hub.publish(.task(self, event), deliver: needsDelivery)
    }

    /// What completing leaves to do outside the lock: wake waiters, end event streams
    /// (`finish()` runs `onTermination`, which takes the lock).
    struct Completion {
        var waiters: [CheckedContinuation<Void, Never>]
        var streams: [AsyncStream<TaskEvent>.Continuation]
    }

    func completeLocked(error: FerryError?, in storage: inout Storage) -> Completion {
        storage.error = error
        let end = Date()
        let start = min(storage.resumedAt ?? end, end)
        let metrics = TaskMetrics(
            transactions: storage.transactions,
            taskInterval: DateInterval(start: start, end: end)
        )
        storage.metrics = metrics
        if error == nil { reportFinalProgress(in: &storage) }
        letProgressQueuesCatchUp(in: &storage)
        publish(.finishedCollectingMetrics(metrics), in: &storage)
        publish(.completed(error), in: &storage)
        let completion = Completion(
            waiters: storage.completionWaiters + storage.daemonWaiters,
            streams: Array(storage.subscribers.values)
        )
        storage.subscribers = [:]
        storage.completionWaiters = []
        storage.daemonWaiters = []
        storage.transfer = nil
        return completion
    }

    func didComplete(waiters completion: Completion) {
        // Out of the session's list before anyone hears of the end: `allTasks` (URLSession's
        // getAllTasks) never lists a task whose caller was told it finished.
        session?.taskDidComplete(self)
        switch plan {
        case .stream(let sink): sink.taskCompleted(with: storage.withLock { $0.error })
        case .socket(let connection): connection.taskEnded(storage.withLock { $0.error })
        case .data, .upload, .download: break
        }
        for stream in completion.streams { stream.finish() }
        for waiter in completion.waiters { waiter.resume() }
    }
}
