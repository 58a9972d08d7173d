public import Foundation
import Synchronization

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// A transfer in a ``Session``: the shared lifecycle, progress and events of data, upload and
/// download tasks, shaped like `URLSessionTask`.
///
/// A task is created `suspended`; ``resume()`` starts it. ``suspend()`` stops reading from
/// the connection (the server is slowed by TCP back-pressure) and ``resume()`` goes on.
/// ``cancel()`` ends it. Whatever order these calls and the network's own events arrive in,
/// the task's events are ordered and ``TaskEvent/completed(_:)`` comes exactly once.
///
/// ```swift
/// let task = session.downloadTask(with: url, to: .file(destination))
/// Task { for await event in task.events { print(event) } }
/// task.resume()
/// ```
///
/// ## Thread safety
/// Every member may be called from any thread. All mutable state lives in one struct behind
/// one lock; the class is `@unchecked Sendable` because its only stored properties are
/// `let`s of `Sendable` values and that `Mutex`, which Swift cannot see through a non-final
/// class. Subclasses are `final` and add no mutable state.
public class SessionTask: @unchecked Sendable, Identifiable, CustomStringConvertible {
    struct Storage {
        var machine = TaskStateMachine()
        var taskDescription: String?
        var currentRequest: URLRequest
        var response: HTTPResponse?
        var error: FerryError?
        var bytesSent: Int64 = 0
        var bytesExpectedToSend: Int64?
        var bytesReceived: Int64 = 0
        var bytesExpectedToReceive: Int64?
        var redirectPolicy: RedirectPolicy?
        var retryPolicy: RetryPolicy?
        var resumeKey: String?
        var checksum: Checksum?
        var resumesFromStore = false
        var priority: Float = 0.5
        var earliestBeginDate: Date?
        /// The daemon's id of a background session's task, once submitted.
        var backgroundID: Int64?
        /// The owner asked for resume data when it cancelled.
        var producesResumeData = false
        var subscribers: [Int: AsyncStream<TaskEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var completionWaiters: [CheckedContinuation<Void, Never>] = []
        var pauseWaiters: [CheckedContinuation<Void, Never>] = []
        var transfer: Task<Void, Never>?
        var lastActivity = ContinuousClock.now
        /// Waiting for a connection slot: the idle timeout does not run.
        var queued = false
        var startedAt: ContinuousClock.Instant?
        var outcome: TaskOutcome?
        var completionHandler: (@Sendable (SessionTask, FerryError?) -> Void)?
        var resumedAt: Date?
        var transactions: [TransactionMetrics] = []
        var metrics: TaskMetrics?
    }

    /// The identifier of the task, unique within its session.
    public let taskIdentifier: Int
    /// The request the task was created with.
    public let originalRequest: URLRequest
    /// What the transfer does with its body.
    let plan: TransferPlan
    let hub: EventHub
    private let sessionReference: WeakSession
    let storage: Mutex<Storage>

    init(identifier: Int, request: URLRequest, plan: TransferPlan, session: Session) {
        taskIdentifier = identifier
        originalRequest = request
        self.plan = plan
        hub = session.hub
        sessionReference = WeakSession(session)
        storage = Mutex(Storage(currentRequest: request))
        if case .upload(let body) = plan { storage.withLock { $0.bytesExpectedToSend = body.length } }
    }

    /// The session the task belongs to, while it exists.
    public var session: Session? { sessionReference.value }

    public var id: Int { taskIdentifier }

    // MARK: Observable state

    /// A description for people; Ferry never reads it. A background session's task keeps it
    /// in the daemon: how a relaunched process recognizes the task it reattached.
    public var taskDescription: String? {
        get { storage.withLock { $0.taskDescription } }
        set { storage.withLock { $0.taskDescription = newValue } }
    }

    /// For a background session: 0 (lowest) … 1 (highest), 0.5 by default; higher starts
    /// first. Set before ``resume()``.
    public var priority: Float {
        get { storage.withLock { $0.priority } }
        set { storage.withLock { $0.priority = min(1, max(0, newValue)) } }
    }

    /// For a background session: the task does not start before this date (URLSession's
    /// `earliestBeginDate`). Set before ``resume()``.
    public var earliestBeginDate: Date? {
        get { storage.withLock { $0.earliestBeginDate } }
        set { storage.withLock { $0.earliestBeginDate = newValue } }
    }

    /// The request being sent now: after redirects, the last one.
    public var currentRequest: URLRequest { storage.withLock { $0.currentRequest } }
    /// The final response head, once it arrived.
    public var response: HTTPResponse? { storage.withLock { $0.response } }
    /// Where the task is in its lifecycle.
    public var state: TaskState { storage.withLock { $0.machine.publicState } }
    /// The error the task completed with, if it failed.
    public var error: FerryError? { storage.withLock { $0.error } }

    /// What the task's requests took; set when it completes.
    public var metrics: TaskMetrics? { storage.withLock { $0.metrics } }

    /// Adds a finished request to the task's metrics.
    func record(_ transaction: TransactionMetrics) {
        storage.withLock { $0.transactions.append(transaction) }
    }

    /// Whether the task already sent a request (so the next one has a reason).
    var hasTransactions: Bool { storage.withLock { !$0.transactions.isEmpty } }
    /// Request body bytes handed to the connection.
    public var countOfBytesSent: Int64 { storage.withLock { $0.bytesSent } }
    /// Request body length, or `nil` when unknown (a stream of unknown length, or no body yet).
    public var countOfBytesExpectedToSend: Int64? { storage.withLock { $0.bytesExpectedToSend } }
    /// Response body bytes received.
    public var countOfBytesReceived: Int64 { storage.withLock { $0.bytesReceived } }
    /// Response body length from `Content-Length`, or `nil` when unknown.
    public var countOfBytesExpectedToReceive: Int64? { storage.withLock { $0.bytesExpectedToReceive } }

    /// Progress of the request body.
    public var uploadProgress: TransferProgress {
        storage.withLock { TransferProgress(completedBytes: $0.bytesSent, totalBytes: $0.bytesExpectedToSend) }
    }

    /// Progress of the response body.
    public var downloadProgress: TransferProgress {
        storage.withLock {
            TransferProgress(completedBytes: $0.bytesReceived, totalBytes: $0.bytesExpectedToReceive)
        }
    }

    /// This task's redirect policy; `nil` uses the session's. Set it before `resume()`.
    public var redirectPolicy: RedirectPolicy? {
        get { storage.withLock { $0.redirectPolicy } }
        set { storage.withLock { $0.redirectPolicy = newValue } }
    }

    /// This task's retry policy for downloads; `nil` uses the session's. Set it before
    /// `resume()`.
    public var retryPolicy: RetryPolicy? {
        get { storage.withLock { $0.retryPolicy } }
        set { storage.withLock { $0.retryPolicy = newValue } }
    }

    /// The digest the downloaded file must have; checked on the complete file before it
    /// reaches its destination. With a checksum, a download may also continue bytes that no
    /// strong validator identifies: the checksum proves the result. Set it before `resume()`.
    public var checksum: Checksum? {
        get { storage.withLock { $0.checksum } }
        set { storage.withLock { $0.checksum = newValue } }
    }

    /// The key of this download in the session's ``ResumeStore``; `nil` uses the request's
    /// URL. Set it before `resume()`.
    public var resumeKey: String? {
        get { storage.withLock { $0.resumeKey } }
        set { storage.withLock { $0.resumeKey = newValue } }
    }

    /// Whether this download continues from the session's ``ResumeStore`` entry for its key
    /// (when there is one). When `false`, an entry for the key is discarded and the download
    /// starts over. Set it before `resume()`.
    public var resumesFromStore: Bool {
        get { storage.withLock { $0.resumesFromStore } }
        set { storage.withLock { $0.resumesFromStore = newValue } }
    }

    /// The key under which the session's store keeps this download.
    var effectiveResumeKey: String { resumeKey ?? originalRequest.url?.absoluteString ?? "\(taskIdentifier)" }

    public var description: String {
        let (state, url) = storage.withLock { ($0.machine.publicState, $0.currentRequest.url) }
        return "\(type(of: self))(\(taskIdentifier), \(state), \(url?.absoluteString ?? "no URL"))"
    }

    /// The task's events from now on. Subscribe before ``resume()`` to see them all; a
    /// subscription made after completion gets the completion alone.
    public var events: AsyncStream<TaskEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: TaskEvent.self)
        let id: Int? = storage.withLock { storage in
            if storage.machine.state == .completed {
                continuation.yield(.completed(storage.error))
                continuation.finish()
                return nil
            }
            storage.nextSubscriber += 1
            storage.subscribers[storage.nextSubscriber] = continuation
            return storage.nextSubscriber
        }
        if let id {
            continuation.onTermination = { [weak self] _ in
                _ = self?.storage.withLock { $0.subscribers.removeValue(forKey: id) }
            }
        }
        return stream
    }

    // MARK: Lifecycle

    /// Starts the task, or lets a suspended one go on.
    public func resume() {
        guard let session else {
            cancel(with: FerryError(.sessionInvalidated, "The task's session no longer exists."))
            return
        }
        if session.isInvalidated {
            cancel(
                with: FerryError(
                    .sessionInvalidated,
                    "The session was invalidated; create a new session for new tasks."
                )
            )
            return
        }
        let waiters: [CheckedContinuation<Void, Never>] = storage.withLock { storage in
            switch storage.machine.resume() {
            case .startTransfer:
                let now = ContinuousClock.now
                storage.startedAt = now
                storage.resumedAt = Date()
                storage.lastActivity = now
                publish(.resumed, in: &storage)
                if let background = session.background {
                    storage.transfer = Task { await background.run(self, session: session) }
                } else {
                    // The place in the per-host queue is taken now, so tasks resumed one after
                    // another start in that order (their Swift tasks may run in any order).
                    let admission = originalRequest.url.map { session.engine.admission.reserve(for: Origin($0)) }
                    storage.transfer = Task {
                        await Transfer(task: self, session: session, admission: admission).run()
                    }
                }
                return []
            case .unpause:
                storage.lastActivity = .now
                publish(.resumed, in: &storage)
                defer { storage.pauseWaiters = [] }
                return storage.pauseWaiters
            case .none:
                return []
            }
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Stops reading from the connection until ``resume()``. The connection stays open and
    /// the server is slowed by TCP back-pressure; time suspended does not count towards the
    /// idle timeout.
    public func suspend() {
        storage.withLock { storage in
            if storage.machine.suspend() == .pause { publish(.suspended, in: &storage) }
        }
    }

    /// Cancels the task. It completes with ``FerryError/Reason/cancelled``, unless it had
    /// already committed to its outcome.
    public func cancel() {
        cancel(with: .cancelled())
    }

    func cancel(with error: FerryError) {
        enum Next {
            case nothing
            case stop(Task<Void, Never>?, [CheckedContinuation<Void, Never>])
            case completed(Completion)
        }
        let next: Next = storage.withLock { storage in
            switch storage.machine.cancel(error) {
            case .none:
                return .nothing
            case .stopTransfer:
                defer { storage.pauseWaiters = [] }
                return .stop(storage.transfer, storage.pauseWaiters)
            case .completeWithoutTransfer(let error):
                return .completed(completeLocked(error: error, in: &storage))
            }
        }
        switch next {
        case .nothing:
            break
        case .stop(let transfer, let waiters):
            transfer?.cancel()
            for waiter in waiters { waiter.resume() }
        case .completed(let waiters):
            didComplete(waiters: waiters)
        }
    }

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

    /// Marks the task as waiting for (or holding) a connection slot; waiting is not idleness.
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
        while backgroundID == nil {
            if let error = storage.withLock({ $0.machine.publicState == .completed ? $0.error : nil }) { throw error }
            if storage.withLock({ $0.machine.publicState == .completed }) { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// A background task's bytes as the daemon reports them.
    func backgroundProgress(received: Int64, expected: Int64?) {
        let delta: Int64 = storage.withLock { storage in
            storage.bytesExpectedToReceive = expected ?? storage.bytesExpectedToReceive
            return max(0, received - storage.bytesReceived)
        }
        if delta > 0 { didWrite(bytes: delta, publish: true, unpublished: delta) }
    }

    var backgroundID: Int64? {
        get { storage.withLock { $0.backgroundID } }
        set { storage.withLock { $0.backgroundID = newValue } }
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
        storage.withLock { storage in
            storage.bytesReceived += Int64(buffer.count)
            storage.lastActivity = .now
            if publishData && (hasListeners(storage) || session?.delegate != nil) {
                publish(.data(Data(buffer)), in: &storage)
            }
        }
    }

    /// Counts bytes written to disk; publishes `wroteData` when `publish` is set (the
    /// transfer coalesces these in time).
    func didWrite(bytes: Int64, publish shouldPublish: Bool, unpublished: Int64) {
        storage.withLock { storage in
            storage.bytesReceived += bytes
            storage.lastActivity = .now
            if shouldPublish {
                publish(
                    .wroteData(
                        bytesWritten: unpublished,
                        totalBytesWritten: storage.bytesReceived,
                        totalBytesExpectedToWrite: storage.bytesExpectedToReceive
                    ),
                    in: &storage
                )
            }
        }
    }

    func didSend(bytes: Int64, publish shouldPublish: Bool, unpublished: Int64) {
        storage.withLock { storage in
            storage.bytesSent += bytes
            storage.lastActivity = .now
            if shouldPublish {
                publish(
                    .sentBodyData(
                        bytesSent: unpublished,
                        totalBytesSent: storage.bytesSent,
                        totalBytesExpectedToSend: storage.bytesExpectedToSend
                    ),
                    in: &storage
                )
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

    func setCompletionHandler(_ handler: @escaping @Sendable (SessionTask, FerryError?) -> Void) {
        storage.withLock { $0.completionHandler = handler }
    }

    var completionHandler: (@Sendable (SessionTask, FerryError?) -> Void)? {
        storage.withLock { $0.completionHandler }
    }

    var outcome: TaskOutcome? { storage.withLock { $0.outcome } }

    // MARK: Private

    private func hasListeners(_ storage: Storage) -> Bool {
        !storage.subscribers.isEmpty || hub.hasSubscribers
    }

    private func publish(_ event: TaskEvent, in storage: inout Storage) {
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

    private func completeLocked(error: FerryError?, in storage: inout Storage) -> Completion {
        storage.error = error
        let end = Date()
        let start = min(storage.resumedAt ?? end, end)
        let metrics = TaskMetrics(
            transactions: storage.transactions,
            taskInterval: DateInterval(start: start, end: end)
        )
        storage.metrics = metrics
        publish(.finishedCollectingMetrics(metrics), in: &storage)
        publish(.completed(error), in: &storage)
        let completion = Completion(waiters: storage.completionWaiters, streams: Array(storage.subscribers.values))
        storage.subscribers = [:]
        storage.completionWaiters = []
        storage.transfer = nil
        return completion
    }

    private func didComplete(waiters completion: Completion) {
        // Out of the session's list before anyone hears of the end: `allTasks` (URLSession's
        // getAllTasks) never lists a task whose caller was told it finished.
        session?.taskDidComplete(self)
        for stream in completion.streams { stream.finish() }
        for waiter in completion.waiters { waiter.resume() }
    }
}

/// What a finished task hands out besides its response.
enum TaskOutcome: Sendable {
    /// A data or upload task's body.
    case data(Data)
    /// A download's file: at its destination, or handed over to the caller.
    case file(URL)
    /// A data task whose body went to a download task.
    case becameDownload

    var data: Data? {
        if case .data(let data) = self { return data }
        return nil
    }

    var file: URL? {
        if case .file(let url) = self { return url }
        return nil
    }
}

/// A weak reference that can be stored in a `Sendable` value.
final class WeakSession: Sendable {
    private let reference: Mutex<Reference>
    private struct Reference: @unchecked Sendable {
        // Safe: `Session` is Sendable; the wrapper only exists because a weak stored
        // property cannot be declared inside `Mutex` directly.
        weak var session: Session?
    }

    init(_ session: Session) { reference = Mutex(Reference(session: session)) }
    var value: Session? { reference.withLock { $0.session } }
}

extension HTTPResponse {
    /// The body length a client should expect (RFC 9110 §6.4.1): none for HEAD, 1xx, 204, 304.
    func expectedBodyLength(forMethod method: HTTPMethod) -> Int64? {
        if method == .head || statusCode == 204 || statusCode == 304 || (100..<200).contains(statusCode) {
            return 0
        }
        return expectedContentLength
    }
}
