import Synchronization

/// The Swift task that runs a task's transfer: made at once, or only once the transfer may
/// start.
///
/// A transfer queued behind the per-host limit gets its Swift task when its slot is granted
/// (``start()``), so a thousand queued downloads hold no Swift task memory and cost the
/// executor nothing until they can run. Until then the handle stands in for the Swift task:
/// ``cancel()`` starts it already cancelled, so a transfer cancelled (or timed out) in the
/// queue ends on the path of one that was waiting in its own Swift task (the same error, span
/// and completion), and ``checkTimeouts()`` starts it once the resource timeout is due, for
/// the transfer to report it.
///
/// Thread-safe. The Swift task is made at most once; `make` runs under the handle's lock, so
/// it must not call back into the handle.
final class TransferHandle: TimeoutChecking {
    private enum State {
        case waiting(make: @Sendable (TransferHandle) -> Task<Void, Never>, resourceDeadline: ContinuousClock.Instant)
        case started(Task<Void, Never>)
    }

    private let state: Mutex<State>

    /// A handle for a transfer whose Swift task already runs.
    init(started task: Task<Void, Never>) {
        state = Mutex(.started(task))
    }

    /// A handle whose Swift task `make` creates (given the handle) on the first ``start()``,
    /// ``cancel()``, or check after `resourceDeadline`.
    init(resourceDeadline: ContinuousClock.Instant, make: @escaping @Sendable (TransferHandle) -> Task<Void, Never>) {
        state = Mutex(.waiting(make: make, resourceDeadline: resourceDeadline))
    }

    /// Makes the Swift task if it was not made yet, and returns it.
    @discardableResult
    func start() -> Task<Void, Never> {
        state.withLock { state in
            switch state {
            case .started(let task):
                return task
            case .waiting(let make, _):
                let task = make(self)
                state = .started(task)
                return task
            }
        }
    }

    /// Cancels the Swift task, making it first if it was not made yet.
    func cancel() {
        start().cancel()
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
