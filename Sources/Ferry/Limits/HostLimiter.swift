import Synchronization

/// Enforces ``SessionConfiguration/httpMaximumConnectionsPerHost`` for one session.
///
/// Owns a ``HostScheduler`` behind a lock and parks waiting tasks on continuations (or, for a
/// transfer that has no Swift task yet, keeps what starts it: ``whenGranted(_:start:)``).
/// Safe to call from any thread; `acquire` honours task cancellation by leaving the queue. Each
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
        /// What makes the Swift task of a transfer that has none yet, run once its place
        /// is granted (see ``whenGranted(_:start:)``).
        var starters: [HostScheduler.Ticket: @Sendable () -> Void] = [:]
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

        /// The place is in the queue: no slot was free when it was taken.
        var waits: Bool { ticket != nil }
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

    /// Runs `start` once `reservation` is granted its slot, on the thread that gives the slot
    /// up, so that a queued transfer needs no Swift task until it can run. Returns `true`,
    /// without keeping `start`, when the place is granted already (or was never queued): the
    /// caller starts at once. Either way the transfer then takes its slot with
    /// ``acquire(_:)``, which returns at once.
    func whenGranted(_ reservation: Reservation, start: @escaping @Sendable () -> Void) -> Bool {
        guard let ticket = reservation.ticket else { return true }
        return state.withLock { state in
            if state.grantedBeforeParking.contains(ticket) { return true }
            state.starters[ticket] = start
            return false
        }
    }

    /// Waits until `reservation` holds its slot. Throws `CancellationError` if the calling
    /// task is cancelled while waiting; then no slot is held.
    func acquire(_ reservation: Reservation) async throws {
        let origin = reservation.origin
        guard let ticket = reservation.ticket else { return }
        // A transfer started by its grant (``whenGranted(_:start:)``) finds its slot here.
        let granted = state.withLock { state in
            state.starters[ticket] = nil
            return state.grantedBeforeParking.remove(ticket) != nil
        }
        if granted { return }
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
            state.starters[ticket] = nil
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
        enum Next {
            case nothing
            case resume(CheckedContinuation<Void, any Error>)
            case start(@Sendable () -> Void)
        }
        let next: Next = state.withLock { state in
            switch state.scheduler.release(for: origin) {
            case .none: return .nothing
            case .grant(let ticket):
                if let parked = state.parked.removeValue(forKey: ticket) { return .resume(parked) }
                state.grantedBeforeParking.insert(ticket)
                return state.starters.removeValue(forKey: ticket).map(Next.start) ?? .nothing
            }
        }
        switch next {
        case .nothing: break
        case .resume(let continuation): continuation.resume()
        case .start(let start): start()
        }
    }
}
