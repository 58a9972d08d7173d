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
///
/// ## Lock order
/// Session, then task, then the per-host limiter or the event hub: the session's lock may be
/// held while a task's is taken (its registry asks tasks for their state), a task's while the
/// limiter's (`TaskRunner` reserves a place) or the hub's (events are published in order)
/// is taken, never the other way round. Continuations are resumed, and delegates and
/// completion handlers called, after every lock is released.
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
        var resumableUploads: ResumableUploadPolicy?
        /// A resumable upload's upload resource, once the server created it.
        var uploadURL: URL?
        var resumeKey: String?
        var checksum: Checksum?
        var resumesFromStore = false
        var priority: Float = 0.5
        var maximumConnections: Int?
        var maximumBytesPerSecond: Int64?
        var earliestBeginDate: Date?
        /// The daemon's id of a background session's task, once submitted.
        var backgroundID: Int64?
        /// Callers of `waitUntilInDaemon`, until the daemon has the task or it completed, by a
        /// number of their own (a cancelled one leaves).
        var daemonWaiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextDaemonWaiter = 0
        /// The owner asked for resume data when it cancelled.
        var producesResumeData = false
        /// What an upload task continues (``Session/uploadTask(withResumeData:headers:)``).
        var uploadResume: UploadResumeData?
        var subscribers: [Int: AsyncStream<TaskEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var completionWaiters: [CheckedContinuation<Void, Never>] = []
        var pauseWaiters: [CheckedContinuation<Void, Never>] = []
        var transfer: TransferHandle?
        /// The running transfer's metrics and spans, when the session records any.
        var telemetry: TaskTelemetry?
        var lastActivity = ContinuousClock.now
        /// Waiting for a connection slot or before a retry: the idle timeout does not run.
        var queued = false
        var startedAt: ContinuousClock.Instant?
        var outcome: TaskOutcome?
        var completionHandler: (@Sendable (SessionTask, FerryError?) -> Void)?
        var progressHandlers = ProgressHandlers()
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
    /// The session the task belongs to, while it exists.
    public weak let session: Session?
    let storage: Mutex<Storage>

    init(identifier: Int, request: URLRequest, plan: TransferPlan, session: Session) {
        taskIdentifier = identifier
        originalRequest = request
        self.plan = plan
        hub = session.hub
        self.session = session
        storage = Mutex(Storage(currentRequest: request))
        if case .upload(let body) = plan { storage.withLock { $0.bytesExpectedToSend = body.length } }
        if case .stream(_, let body?) = plan { storage.withLock { $0.bytesExpectedToSend = body.length } }
    }

    public var id: Int { taskIdentifier }

    // MARK: Observable state

    /// A description for people; Ferry never reads it. A background session's task keeps it
    /// in the daemon: how a relaunched process recognizes the task it reattached.
    public var taskDescription: String? {
        get { storage.withLock { $0.taskDescription } }
        set { storage.withLock { $0.taskDescription = newValue } }
    }

    /// 0 (lowest) … 1 (highest), 0.5 by default: among tasks waiting for a connection to the
    /// same origin (``SessionConfiguration/httpMaximumConnectionsPerHost``), or for the
    /// daemon's transfer slots in a background session, higher starts first; equal ones in
    /// the order they were resumed. Set before ``resume()``.
    public var priority: Float {
        get { storage.withLock { $0.priority } }
        set { storage.withLock { $0.priority = min(1, max(0, newValue)) } }
    }

    /// Most bytes per second this task moves, each way, over all its connections (curl's
    /// `--limit-rate`); the session's ``SessionConfiguration/maximumBytesPerSecond`` applies
    /// too. `nil` (the default): no limit of its own. Set before ``resume()``.
    public var maximumBytesPerSecond: Int64? {
        get { storage.withLock { $0.maximumBytesPerSecond } }
        set { storage.withLock { $0.maximumBytesPerSecond = newValue.map { max(1, $0) } } }
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

    /// Whether this upload task uses a resumable-upload protocol, and which; `nil` uses the
    /// session's ``SessionConfiguration/resumableUploads``. Set it before `resume()`.
    public var resumableUploads: ResumableUploadPolicy? {
        get { storage.withLock { $0.resumableUploads } }
        set { storage.withLock { $0.resumableUploads = newValue } }
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

    /// For a background session's task: returns once the daemon has stored the task (from
    /// then on it runs whatever happens to this process), or throws the error the task
    /// completed with before that, or ``FerryError/Reason/cancelled`` when the calling Swift
    /// task is cancelled first (the task goes on). Returns at once for other sessions' tasks.
    ///
    /// ```swift
    /// let task = session.downloadTask(with: url)
    /// task.resume()
    /// try await task.waitUntilInDaemon()
    /// exit(0)  // the download goes on in `ferry daemon`
    /// ```
    public func waitUntilInDaemon() async throws(FerryError) {
        guard session?.background != nil else { return }
        // Woken when the id is set or the task completes, whichever comes first, or when the
        // caller is cancelled.
        let id = storage.withLock { storage in
            defer { storage.nextDaemonWaiter += 1 }
            return storage.nextDaemonWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waits = storage.withLock { storage in
                    guard storage.backgroundID == nil, storage.machine.publicState != .completed, !Task.isCancelled
                    else { return false }
                    storage.daemonWaiters[id] = continuation
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            storage.withLock { $0.daemonWaiters.removeValue(forKey: id) }?.resume()
        }
        let (stored, error) = storage.withLock { ($0.backgroundID != nil, $0.error) }
        if stored { return }
        if let error { throw error }
        if Task.isCancelled { throw .cancelled() }
    }

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
                client.publish(.resumed, in: &storage)
                storage.transfer = session.runner.launch(self, priority: storage.priority, in: session)
                return []
            case .unpause:
                storage.lastActivity = .now
                client.publish(.resumed, in: &storage)
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
            if storage.machine.suspend() == .pause { client.publish(.suspended, in: &storage) }
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
            case stop(TransferHandle?, [CheckedContinuation<Void, Never>])
            case completed(TaskClient.Completion)
        }
        let next: Next = storage.withLock { storage in
            switch storage.machine.cancel(error) {
            case .none:
                return .nothing
            case .stopTransfer:
                defer { storage.pauseWaiters = [] }
                return .stop(storage.transfer, storage.pauseWaiters)
            case .completeWithoutTransfer(let error):
                return .completed(client.completeLocked(error: error, in: &storage))
            }
        }
        switch next {
        case .nothing:
            break
        case .stop(let transfer, let waiters):
            transfer?.cancel()
            for waiter in waiters { waiter.resume() }
        case .completed(let waiters):
            client.didComplete(waiters: waiters)
        }
    }
}

/// A weak reference to a session that can be handed to a Swift task.
final class WeakSession: Sendable {
    /// The session, while it exists.
    weak let value: Session?

    init(_ session: Session) { value = session }
}
