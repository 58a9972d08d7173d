import NIOPosix
import Synchronization

/// The Swift task that runs a task's transfer: made at once, or only once the transfer may
/// start.
///
/// A transfer queued behind the per-host limit gets its Swift task when its slot is granted
/// (``start(inline:)``), so a thousand queued downloads hold no Swift task memory and cost the
/// executor nothing until they can run. Until then the handle stands in for the Swift task:
/// ``cancel()`` starts it already cancelled, so a transfer cancelled (or timed out) in the
/// queue ends on the path of one that was waiting in its own Swift task (the same error, span
/// and completion), and ``checkTimeouts()`` starts it once the resource timeout is due, for
/// the transfer to report it.
///
/// Thread-safe. The Swift task is made at most once, outside the handle's lock: an inline
/// start runs the transfer up to its first suspension inside `make`, and the transfer may
/// cancel its own handle meanwhile.
final class TransferHandle: TimeoutChecking {
    /// Makes the Swift task; `inline` asks for one that runs on the calling thread up to
    /// its first suspension (`Task.immediate`).
    typealias Make = @Sendable (TransferHandle, _ inline: Bool) -> Task<Void, Never>

    private enum State {
        case waiting(make: Make, resourceDeadline: ContinuousClock.Instant)
        /// `make` runs; `cancelled` once ``cancel()`` was called meanwhile.
        case starting(cancelled: Bool)
        case started(Task<Void, Never>)
    }

    private let state: Mutex<State>

    /// Marks a thread that is running a transfer started inline, up to its first suspension.
    private final class InlineStart: Sendable {}
    private static let inlineStart = ThreadSpecificVariable<InlineStart>()

    /// A handle for a transfer whose Swift task already runs.
    init(started task: Task<Void, Never>) {
        state = Mutex(.started(task))
    }

    /// A handle whose Swift task `make` creates (given the handle) on the first
    /// ``start(inline:)``, ``cancel()``, or check after `resourceDeadline`.
    init(resourceDeadline: ContinuousClock.Instant, make: @escaping Make) {
        state = Mutex(.waiting(make: make, resourceDeadline: resourceDeadline))
    }

    /// Makes the Swift task if it was not made yet, and returns it (`nil` while another
    /// thread is making it).
    ///
    /// With `inline`, called from a Swift task (the one that gave its slot up), the transfer
    /// runs on this thread until it first suspends: its request goes out without waiting
    /// behind the executor's queue, before the caller's own remaining work (a finished
    /// download's delivery). Not inline when this thread is already running a transfer
    /// started inline, so that transfers which end before they suspend (and give their slot
    /// to the next) never nest deeper than one.
    @discardableResult
    func start(inline: Bool = false) -> Task<Void, Never>? {
        let (make, made): (Make?, Task<Void, Never>?) = state.withLock { state in
            switch state {
            case .waiting(let make, _):
                state = .starting(cancelled: false)
                return (make, nil)
            case .starting: return (nil, nil)
            case .started(let task): return (nil, task)
            }
        }
        guard let make else { return made }
        let task: Task<Void, Never>
        if inline, Self.inlineStart.currentValue == nil, withUnsafeCurrentTask(body: { $0 != nil }) {
            Self.inlineStart.currentValue = InlineStart()
            defer { Self.inlineStart.currentValue = nil }
            task = make(self, true)
        } else {
            task = make(self, false)
        }
        let cancelled = state.withLock { state in
            defer { state = .started(task) }
            guard case .starting(let cancelled) = state else { return false }
            return cancelled
        }
        if cancelled { task.cancel() }
        return task
    }

    /// Cancels the Swift task, making it first if it was not made yet.
    func cancel() {
        if let task = start() { return task.cancel() }
        // Being made (on another thread, or by this thread's inline start): cancelled as
        // soon as it exists.
        let made: Task<Void, Never>? = state.withLock { state in
            guard case .started(let task) = state else {
                state = .starting(cancelled: true)
                return nil
            }
            return task
        }
        made?.cancel()
    }

    /// Starts the transfer once its resource timeout is due while it still waits for its
    /// slot: it then finds the timeout due and ends with it.
    func checkTimeouts() {
        let due = state.withLock { state in
            guard case .waiting(_, let deadline) = state else { return false }
            return ContinuousClock.now >= deadline
        }
        if due { start() }
    }
}
