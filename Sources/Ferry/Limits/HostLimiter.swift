import Synchronization

/// Enforces ``SessionConfiguration/httpMaximumConnectionsPerHost`` for one session.
///
/// Owns a ``HostScheduler`` behind a lock and parks waiting tasks on continuations. Safe to
/// call from any thread; `acquire` honours task cancellation by leaving the queue. Each
/// transfer holds its slots through a ``Lease``; this is the session's only per-host limit
/// (AsyncHTTPClient's pool is given the same number, so it opens the connections the
/// limiter lets through).
final class HostLimiter: Sendable {
    private struct State {
        var scheduler: HostScheduler
        var nextTicket = 0
        var parked: [HostScheduler.Ticket: CheckedContinuation<Void, any Error>] = [:]
        var cancelledBeforeParking: Set<HostScheduler.Ticket> = []
        var grantedBeforeParking: Set<HostScheduler.Ticket> = []
    }

    private let state: Mutex<State>

    init(limit: Int) {
        state = Mutex(State(scheduler: HostScheduler(limit: limit)))
    }

    /// A place in `origin`'s queue, taken at once: tasks are admitted in the order their
    /// places were taken, whatever order their Swift tasks run in.
    struct Reservation: Sendable {
        let origin: Origin
        /// `nil` when a slot was free.
        fileprivate let ticket: HostScheduler.Ticket?
    }

    /// Takes a place in `origin`'s queue (or its slot, when one is free) now, ahead of the
    /// waiting places of lower `priority`.
    func reserve(for origin: Origin, priority: Float) -> Reservation {
        state.withLock { state in
            state.nextTicket += 1
            let ticket = HostScheduler.Ticket(id: state.nextTicket, priority: priority)
            switch state.scheduler.acquire(ticket, for: origin) {
            case .proceed: return Reservation(origin: origin, ticket: nil)
            case .wait: return Reservation(origin: origin, ticket: ticket)
            }
        }
    }

    /// Waits until `reservation` holds its slot. Throws `CancellationError` if the calling
    /// task is cancelled while waiting; then no slot is held.
    func acquire(_ reservation: Reservation) async throws {
        let origin = reservation.origin
        guard let ticket = reservation.ticket else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let early: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelledBeforeParking.remove(ticket) != nil {
                        return .failure(CancellationError())
                    }
                    if state.grantedBeforeParking.remove(ticket) != nil { return .success(()) }
                    state.parked[ticket] = continuation
                    return nil
                }
                if let early { continuation.resume(with: early) }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, any Error>? = state.withLock { state in
                switch state.scheduler.abandon(ticket, for: origin) {
                case .removed:
                    if let parked = state.parked.removeValue(forKey: ticket) { return parked }
                    state.cancelledBeforeParking.insert(ticket)
                    return nil
                case .notWaiting:
                    return nil  // already granted; the grant resumes it and the owner releases
                }
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Gives up a place that will never be waited on: leaves the queue, or gives back the
    /// slot the place already holds.
    func giveUp(_ reservation: Reservation) {
        guard let ticket = reservation.ticket else {
            release(for: reservation.origin)
            return
        }
        let holdsSlot = state.withLock { state in
            switch state.scheduler.abandon(ticket, for: reservation.origin) {
            case .removed: return false
            case .notWaiting: return state.grantedBeforeParking.remove(ticket) != nil
            }
        }
        if holdsSlot { release(for: reservation.origin) }
    }

    /// How many transfers to `origin` hold a slot now.
    func running(for origin: Origin) -> Int {
        state.withLock { $0.scheduler.running[origin, default: 0] }
    }

    /// Gives the slot back, waking the next waiter for `origin` if there is one.
    func release(for origin: Origin) {
        let next: CheckedContinuation<Void, any Error>? = state.withLock { state in
            switch state.scheduler.release(for: origin) {
            case .none: return nil
            case .grant(let ticket):
                if let parked = state.parked.removeValue(forKey: ticket) { return parked }
                state.grantedBeforeParking.insert(ticket)
                return nil
            }
        }
        next?.resume()
    }
}
