import Dispatch
import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a task's transfer (and a background session's link) tell the task and ask of it,
/// as Foundation's `URLProtocolClient` is for a `URLProtocol`: the response, bytes moved,
/// activity, redirects, transactions, events, progress calls and the completion.
///
/// ## Lifecycle and threading
/// A value made on demand (``SessionTask/client``) that holds only its task; every member
/// takes the task's one lock (``SessionTask/storage``), or, for the `in storage:` forms, is
/// called with it already held. Events and progress calls go out through the session's
/// serial delivery context in the order they were made; continuations are resumed after
/// the lock is released.
struct TaskClient: Sendable {
    /// The task reported to.
    let task: SessionTask

    // MARK: Activity and pauses

    /// Waits while the task is suspended. Throws when the transfer is cancelled.
    func waitWhilePaused() async throws {
        // Asked before every read: answered without a continuation while the task runs.
        if task.storage.withLock({ $0.machine.state != .paused }) {
            try Task.checkCancellation()
            return
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let wait = task.storage.withLock { storage in
                    guard storage.machine.state == .paused, !Task.isCancelled else { return false }
                    storage.pauseWaiters.append(continuation)
                    return true
                }
                if !wait { continuation.resume() }
            }
        } onCancel: {
            let waiters = task.storage.withLock { storage in
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
        task.storage.withLock { $0.transfer }?.cancel()
    }

    /// Takes over `other`'s running transfer, which has just received `response`.
    func adoptTransfer(of other: SessionTask, response: HTTPResponse) -> Bool {
        let handle = other.storage.withLock { $0.transfer }
        return task.storage.withLock { storage in
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
    func touch() { task.storage.withLock { $0.lastActivity = .now } }

    /// Marks the task as waiting (for a connection slot, or before a retry) or done waiting;
    /// waiting is not idleness.
    func setQueued(_ queued: Bool) {
        task.storage.withLock { storage in
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
        task.storage.withLock { storage in
            let started = storage.startedAt ?? .now
            let idleDeadline = storage.machine.state == .paused || storage.queued ? nil : storage.lastActivity + idle
            return (idleDeadline, started + resource)
        }
    }

    func setCurrentRequest(_ request: URLRequest, redirectedBy response: HTTPResponse) {
        task.storage.withLock { storage in
            storage.currentRequest = request
            publish(.willRedirect(response: response, newRequest: request), in: &storage)
        }
    }

    /// The final response head arrived; `announce` publishes `.response` (a download that
    /// asks again publishes only its first).
    func didReceive(response: HTTPResponse, announce: Bool = true) {
        task.storage.withLock { storage in
            storage.response = response
            storage.bytesExpectedToReceive = response.expectedBodyLength(forMethod: storage.currentRequest.method)
            if announce { publish(.response(response), in: &storage) }
        }
    }

    /// A download continues at `bytes` of a representation of `expected` bytes.
    func setDownloadPosition(_ bytes: Int64, expected: Int64?) {
        task.storage.withLock { storage in
            storage.bytesReceived = bytes
            storage.bytesExpectedToReceive = expected
        }
    }

    /// A background task's bytes as the daemon reports them.
    func backgroundProgress(received: Int64, expected: Int64?) {
        let delta: Int64 = task.storage.withLock { storage in
            storage.bytesExpectedToReceive = expected ?? storage.bytesExpectedToReceive
            return max(0, received - storage.bytesReceived)
        }
        if delta > 0 { didMove(.written, bytes: delta, publish: true, unpublished: delta) }
    }

    var backgroundID: Int64? {
        get { task.storage.withLock { $0.backgroundID } }
        nonmutating set {
            let waiters = task.storage.withLock { storage in
                storage.backgroundID = newValue
                defer { storage.daemonWaiters = [:] }
                return Array(storage.daemonWaiters.values)
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Whether `cancel` was called (the transfer is stopping).
    var isCanceling: Bool {
        task.storage.withLock { if case .canceling = $0.machine.state { true } else { false } }
    }

    /// Whether the owner cancelled asking for resume data.
    var producesResumeData: Bool { task.storage.withLock { $0.producesResumeData } }

    /// Counts received body bytes; publishes `data` when somebody listens.
    func didReceive(data buffer: UnsafeRawBufferPointer, publishData: Bool) {
        // Asked before the task's lock is taken: the session's lock is never taken inside it.
        let delegateWants = publishData && task.session?.delegate != nil
        task.storage.withLock { storage in
            storage.bytesReceived += Int64(buffer.count)
            storage.lastActivity = .now
            if storage.progressHandlers.countReceived(Int64(buffer.count)) {
                reportProgress(upload: false, in: &storage)
            }
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
        task.storage.withLock { storage in
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

    /// Sets the bytes sent so far: 0 when a body is sent again from its start, the server's
    /// offset when a resumable upload continues.
    func resetSentBytes(to offset: Int64 = 0) { task.storage.withLock { $0.bytesSent = offset } }

    /// Publishes `event`; the task's ``TaskTelemetry`` (when the session records any) sees
    /// it after the lock is released, and counts retries and resumes from it.
    func publish(_ event: TaskEvent) {
        let telemetry = task.storage.withLock { storage in
            publish(event, in: &storage)
            return storage.telemetry
        }
        telemetry?.observe(event)
    }

    /// The running transfer's metrics and spans, when the session records any.
    var telemetry: TaskTelemetry? {
        get { task.storage.withLock { $0.telemetry } }
        nonmutating set { task.storage.withLock { $0.telemetry = newValue } }
    }

    /// Publishes `event` and waits until the delegate has handled it (when there is one).
    func publishAndWaitForDelegate(_ event: TaskEvent) async {
        guard task.session?.delegate != nil else {
            publish(event)
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            task.storage.withLock { storage in
                for subscriber in storage.subscribers.values { subscriber.yield(event) }
                task.hub.publish(.task(task, event), done: continuation)
            }
        }
    }

    /// The transfer asks to commit to its outcome; `false` when a cancel came first.
    func transferWillFinish() -> Bool { task.storage.withLock { $0.machine.transferWillFinish() } }

    /// The transfer ended: completes the task unless it already completed.
    func transferDidFinish(error: FerryError?, outcome: TaskOutcome?) {
        let transferError = error
        let waiters: Completion? = task.storage.withLock { storage in
            guard case .complete(var error) = storage.machine.transferFinished(error: error) else { return nil }
            // A cancel's reason wins, but the resume data the stopped transfer made survives.
            if error != nil, error?.resumeData == nil { error?.resumeData = transferError?.resumeData }
            if error != nil, error?.uploadResumeData == nil {
                error?.uploadResumeData = transferError?.uploadResumeData
            }
            if error == nil { storage.outcome = outcome }
            return completeLocked(error: error, in: &storage)
        }
        if let waiters { didComplete(waiters: waiters) }
    }

    /// Waits for the completion and returns the error and outcome.
    func completion() async -> (FerryError?, TaskOutcome?) {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = task.storage.withLock { storage in
                if storage.machine.state == .completed { return true }
                storage.completionWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
        return task.storage.withLock { ($0.error, $0.outcome) }
    }

    /// Sets the handler called once when the task completes. A task that completed already
    /// (it failed as it was made: a missing file, an invalidated session) has it called now,
    /// in the session's delivery context, or on a task of its own once that context has
    /// ended with the session.
    func setCompletionHandler(_ handler: @escaping @Sendable (SessionTask, FerryError?) -> Void) {
        let completed: FerryError?? = task.storage.withLock { storage in
            guard storage.machine.state == .completed else {
                storage.completionHandler = handler
                return .none
            }
            return .some(storage.error)
        }
        guard case .some(let error) = completed else { return }
        let call: @Sendable () async -> Void = { handler(task, error) }
        if !task.hub.enqueue(call) { Task { await call() } }
    }

    /// The completion handler, taken: whoever takes it calls it, so it runs once.
    func takeCompletionHandler() -> (@Sendable (SessionTask, FerryError?) -> Void)? {
        task.storage.withLock { storage in
            defer { storage.completionHandler = nil }
            return storage.completionHandler
        }
    }

    var outcome: TaskOutcome? { task.storage.withLock { $0.outcome } }

    // MARK: Private

    func hasListeners(_ storage: SessionTask.Storage) -> Bool {
        !storage.subscribers.isEmpty || task.hub.hasSubscribers
    }

    func publish(_ event: TaskEvent, in storage: inout SessionTask.Storage) {
        for subscriber in storage.subscribers.values { subscriber.yield(event) }
        var needsDelivery = task.hub.hasDelegate
        if !needsDelivery, case .completed = event { needsDelivery = storage.completionHandler != nil }
        task.hub.publish(.task(task, event), deliver: needsDelivery)
    }

    /// What completing leaves to do outside the lock: wake waiters, end event streams
    /// (`finish()` runs `onTermination`, which takes the lock).
    struct Completion {
        var waiters: [CheckedContinuation<Void, Never>]
        var streams: [AsyncStream<TaskEvent>.Continuation]
    }

    func completeLocked(error: FerryError?, in storage: inout SessionTask.Storage) -> Completion {
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
            waiters: storage.completionWaiters + storage.daemonWaiters.values,
            streams: Array(storage.subscribers.values)
        )
        storage.subscribers = [:]
        storage.completionWaiters = []
        storage.daemonWaiters = [:]
        storage.transfer = nil
        return completion
    }

    func didComplete(waiters completion: Completion) {
        // Out of the session's list before anyone hears of the end: `allTasks` (URLSession's
        // getAllTasks) never lists a task whose caller was told it finished.
        task.session?.taskDidComplete(task)
        switch task.plan {
        case .stream(let sink, _): sink.taskCompleted(with: task.storage.withLock { $0.error })
        case .socket(let connection): connection.taskEnded(task.storage.withLock { $0.error })
        case .data, .upload, .download: break
        }
        for stream in completion.streams { stream.finish() }
        for waiter in completion.waiters { waiter.resume() }
    }

    // MARK: Metrics

    /// Adds a finished request to the task's metrics.
    func record(_ transaction: TransactionMetrics) {
        task.storage.withLock { $0.transactions.append(transaction) }
    }

    /// Whether the task already sent a request (so the next one has a reason).
    var hasTransactions: Bool { task.storage.withLock { !$0.transactions.isEmpty } }

    // MARK: Progress

    /// A progress closure and where it runs.
    func setProgressHandler(_ handler: ProgressHandlers.Handler, upload: Bool) {
        task.storage.withLock { storage in
            storage.progressHandlers.set(handler, upload: upload)
            // A task that already succeeded gives a late handler its final call.
            if storage.machine.publicState == .completed, storage.error == nil {
                reportFinalProgress(in: &storage)
            }
        }
    }

    /// Reports the upload (`upload`) or download progress the counters show now to its
    /// handler, if one is set, in the delivery context. Called under the task's lock.
    func reportProgress(upload: Bool, in storage: inout SessionTask.Storage) {
        let call =
            upload
            ? storage.progressHandlers.progress(
                upload: true,
                completed: storage.bytesSent,
                total: storage.bytesExpectedToSend
            )
            : storage.progressHandlers.progress(
                upload: false,
                completed: storage.bytesReceived,
                total: storage.bytesExpectedToReceive
            )
        if let call { deliver(call) }
    }

    /// The 100 % calls of a task that succeeded. Called under the task's lock, before the
    /// completion is published, so handlers hear of it before the completion handler runs.
    func reportFinalProgress(in storage: inout SessionTask.Storage) {
        let calls = storage.progressHandlers.finalCalls(
            sent: storage.bytesSent,
            expectedToSend: storage.bytesExpectedToSend,
            received: storage.bytesReceived
        )
        for call in calls { deliver(call) }
    }

    /// Holds the delivery context until every progress call sent to a handler's `queue` has
    /// run there, so the completion handler, delivered next, comes after the last of them
    /// (what a serial queue was given runs in order). Called under the task's lock, before
    /// the completion is published, whether or not the task succeeded.
    ///
    /// The wait is for the queue to run, as URLSession's deliveries wait for its delegate
    /// queue: a queue that never runs holds the session's later deliveries with it.
    func letProgressQueuesCatchUp(in storage: inout SessionTask.Storage) {
        let queues = storage.progressHandlers.queues
        guard !queues.isEmpty else { return }
        _ = task.hub.enqueue {
            for queue in queues {
                await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
            }
        }
    }

    /// Makes a progress call in the delivery context, which is serial and already holds the
    /// events published before. (A session invalidated meanwhile delivers nothing more: no
    /// call.)
    private func deliver(_ call: ProgressHandlers.Call) {
        _ = task.hub.enqueue { call.run() }
    }
}

extension SessionTask {
    /// The task as its transfer reports into it.
    var client: TaskClient { TaskClient(task: self) }
}
