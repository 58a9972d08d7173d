import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Creates and runs data, upload and download tasks: Ferry's `URLSession`.
///
/// A session owns a connection pool, a per-host limit (tasks beyond
/// ``SessionConfiguration/httpMaximumConnectionsPerHost`` wait in order), a directory for
/// partial downloads, and one ordered stream of events that feeds the async APIs, the
/// ``SessionDelegate``, completion handlers and ``events``.
///
/// ```swift
/// let session = try Session(configuration: .default)
/// let (data, response) = try await session.data(from: URL(string: "https://example.com")!)
/// let (file, _) = try await session.download(from: url, to: .file(URL(fileURLWithPath: "big.iso")))
/// session.finishTasksAndInvalidate()
/// ```
///
/// ## Lifecycle
/// A session lives until it is invalidated with ``finishTasksAndInvalidate()`` or
/// ``invalidateAndCancel()``; it then publishes ``SessionEvent/didBecomeInvalid(_:)``, calls
/// the delegate's `didBecomeInvalidWithError` and releases the delegate. Tasks asked of an
/// invalidated session complete at once with ``FerryError/Reason/sessionInvalidated``.
/// All members may be called from any thread.
public final class Session: Sendable {
    private struct State {
        var nextTaskIdentifier = 0
        var tasks: [Int: SessionTask] = [:]
        var invalidation = Invalidation.valid
        var delegate: (any SessionDelegate)?
    }

    private enum Invalidation {
        case valid
        case finishing
        case invalidated
    }

    /// The configuration, copied when the session was made.
    public let configuration: SessionConfiguration
    let engine: Engine
    let hub: EventHub
    /// Where the session's metrics and spans go (nowhere unless the application asked).
    let telemetry: Telemetry
    /// The daemon's side of a background session.
    let background: BackgroundLink?
    /// Where resumed tasks run: the daemon for a background session, this process otherwise.
    let runner: any TaskRunner
    private let state: Mutex<State>

    /// Creates a session.
    ///
    /// - Parameters:
    ///   - configuration: What the session does; copied.
    ///   - delegate: Receives the session's events in order; held until invalidation.
    /// - Throws: ``FerryError/Reason/unsupportedConfiguration`` for invalid limits, an
    ///   invalid background identifier, an `https://` proxy, or TLS options that cannot be
    ///   used; a background session also throws when its daemon cannot be reached or started.
    public init(configuration: SessionConfiguration = .default, delegate: (any SessionDelegate)? = nil) throws {
        let configuration = try configuration.validated()
        self.configuration = configuration
        telemetry = Telemetry(configuration)
        engine = try Engine(
            configuration: configuration,
            tls: try configuration.tls.resolved(
                measuringConnections: configuration.collectsConnectionMetrics,
                bridgingProxy: configuration.proxy?.isBridged == true
            )
        )
        if case .background(let identifier) = configuration.kind {
            background = try BackgroundLink(
                identifier: identifier,
                configuration: configuration,
                attaches: delegate != nil
            )
        } else {
            background = nil
        }
        runner = background ?? LocalRunner()
        state = Mutex(State(delegate: delegate))
        hub = EventHub(hasDelegate: delegate != nil)
        hub.startDelivery { [weak self] event in self?.deliver(event) != nil }
        background?.start(self)
        engine.bridge?.setDelegate { [weak self] challenge in
            guard let self, let delegate = self.delegate else { return .performDefaultHandling }
            return await self.hub.ask { await delegate.session(self, didReceive: challenge) }
        }
    }

    /// A session with the default configuration and no delegate, shared by the process.
    /// Invalidating it has no effect: the whole process uses it.
    public static let shared: Session = {
        // `.default` always validates; the fallback exists only to avoid a crash path.
        let session = (try? Session(configuration: .default)) ?? Session(unvalidated: .default)
        session.isShared.store(true, ordering: .relaxed)
        return session
    }()

    /// Set on ``shared`` only (read without touching `shared`, which would create it).
    private let isShared = Atomic(false)

    private init(unvalidated configuration: SessionConfiguration) {
        self.configuration = configuration
        telemetry = Telemetry(configuration)
        engine = Engine(configuration: configuration, tls: ResolvedTLS(base: nil, pinned: [:]), bridge: nil)
        background = nil
        runner = LocalRunner()
        state = Mutex(State())
        hub = EventHub(hasDelegate: false)
        hub.startDelivery { [weak self] event in self?.deliver(event) != nil }
    }

    deinit {
        background?.close()
        hub.finish(with: .didBecomeInvalid(nil))
    }

    /// The delegate, until the session is invalidated.
    public var delegate: (any SessionDelegate)? { state.withLock { $0.delegate } }

    /// Every event of the session from now on, in the order it happened; the stream ends
    /// after ``SessionEvent/didBecomeInvalid(_:)``.
    public var events: AsyncStream<SessionEvent> { hub.subscribe() }

    /// The tasks that have not completed yet.
    public var allTasks: [SessionTask] {
        state.withLock { $0.tasks.values.sorted { $0.taskIdentifier < $1.taskIdentifier } }
    }

    var isInvalidated: Bool { state.withLock { $0.invalidation != .valid } }

    // MARK: Invalidation

    /// Lets running and already created tasks finish, refuses new ones, then invalidates.
    /// Has no effect on ``shared``, which the whole process uses (as with URLSession's).
    public func finishTasksAndInvalidate() {
        guard !isShared.load(ordering: .relaxed) else { return }
        let done: Bool = state.withLock { state in
            guard state.invalidation == .valid else { return false }
            state.invalidation = .finishing
            return state.tasks.isEmpty
        }
        if done { invalidate() }
    }

    /// Cancels every task, refuses new ones, then invalidates. Has no effect on ``shared``,
    /// which the whole process uses (as with URLSession's).
    public func invalidateAndCancel() {
        guard !isShared.load(ordering: .relaxed) else { return }
        let tasks: [SessionTask] = state.withLock { state in
            guard state.invalidation == .valid else { return [] }
            state.invalidation = .finishing
            return Array(state.tasks.values)
        }
        for task in tasks { task.cancel() }
        let done = state.withLock { $0.invalidation == .finishing && $0.tasks.isEmpty }
        if done { invalidate() }
    }

    private func invalidate() {
        let proceed = state.withLock { state in
            guard state.invalidation == .finishing else { return false }
            state.invalidation = .invalidated
            return true
        }
        guard proceed else { return }
        background?.close()
        hub.finish(with: .didBecomeInvalid(nil))
        let engine = self.engine
        engine.invalidated()
        Task { await engine.shutdown() }
    }

    func taskDidComplete(_ task: SessionTask) {
        let invalidateNow: Bool = state.withLock { state in
            state.tasks.removeValue(forKey: task.taskIdentifier)
            return state.invalidation == .finishing && state.tasks.isEmpty
        }
        if invalidateNow { invalidate() }
    }

    // MARK: Making tasks

    func register<Task: SessionTask>(_ make: (Int) -> Task) -> Task {
        let (task, accepted): (Task, Bool) = state.withLock { state in
            state.nextTaskIdentifier += 1
            let task = make(state.nextTaskIdentifier)
            guard state.invalidation == .valid else { return (task, false) }
            state.tasks[task.taskIdentifier] = task
            return (task, true)
        }
        if !accepted {
            task.cancel(
                with: FerryError(
                    .sessionInvalidated,
                    "The session was invalidated; create a new session for new tasks."
                )
            )
        }
        return task
    }

    /// The tasks that have not completed yet, after a background session has reattached the
    /// tasks a previous process left in the daemon (URLSession's `getAllTasks`); for other
    /// sessions, ``allTasks``.
    public func getAllTasks() async -> [SessionTask] {
        await background?.waitUntilAttached()
        return allTasks
    }

    func task(backgroundID: Int64) -> SessionTask? {
        state.withLock { state in state.tasks.values.first { $0.client.backgroundID == backgroundID } }
    }

    // MARK: Delegate delivery

    private func deliver(_ event: SessionEvent) {
        switch event {
        case .didFinishEventsForBackgroundSession:
            delegate?.sessionDidFinishEvents(forBackgroundSession: self)
        case .didBecomeInvalid(let error):
            let delegate = state.withLock { state in
                defer { state.delegate = nil }
                return state.delegate
            }
            delegate?.session(self, didBecomeInvalidWithError: error)
        case .task(let task, let taskEvent):
            taskEvent.deliver(of: task, to: delegate, in: self)
        }
    }
}
