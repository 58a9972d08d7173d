import Synchronization

extension HostLimiter {
    /// One transfer's hold on the session's per-host scheduler: at most one slot at a time,
    /// for the origin of the hop being sent.
    ///
    /// The transfer takes its first slot before it opens files (``hold(_:)`` with the origin
    /// of its original request, whose place in the queue was reserved when the task was
    /// resumed), keeps it while it sends to that origin, trades it for another origin's slot
    /// when a redirect leads there, and gives it back (``release()``) while it sleeps before a
    /// retry or waits for an interceptor, and once a download's body is in (before its file is
    /// flushed, verified, handed to the delegate and moved), so a task that is not using a
    /// connection never keeps another from starting. Holding one slot at most also means two
    /// transfers can never wait for each other's slots.
    ///
    /// One transfer uses its lease from one Swift task at a time; ``release()`` may also be
    /// called when the transfer ends, from any thread.
    final class Lease: Sendable {
        private let limiter: HostLimiter
        private struct State {
            /// The place reserved when the task was resumed, until the first ``hold(_:)``.
            var reservation: Reservation?
            var held: Origin?
        }
        private let state: Mutex<State>
        /// Told `true` while the transfer waits for a slot, `false` once it has one.
        private let queued: @Sendable (Bool) -> Void
        /// The task's priority, for the places taken after the first.
        private let priority: Float
        /// Which of a segmented download's connections this slot serves: each has a
        /// connection of its own, over HTTP/2 too (see ``Engine/client(for:decompressing:bridged:connection:)``).
        /// 0 for every other transfer.
        let connection: Int

        init(
            _ limiter: HostLimiter,
            reservation: Reservation?,
            priority: Float,
            connection: Int = 0,
            queued: @escaping @Sendable (Bool) -> Void
        ) {
            self.limiter = limiter
            self.priority = priority
            self.connection = connection
            self.state = Mutex(State(reservation: reservation))
            self.queued = queued
        }

        /// The origin whose slot is held, if any.
        var origin: Origin? { state.withLock { $0.held } }

        /// The origin of the place reserved when the task was resumed, until the first
        /// ``hold(_:)``.
        var reservedOrigin: Origin? { state.withLock { $0.reservation?.origin } }

        /// Waits until the lease holds one of `origin`'s slots, giving back a slot it holds
        /// for another origin first. Throws `CancellationError` if the calling task is
        /// cancelled while waiting; then no slot is held.
        func hold(_ origin: Origin) async throws {
            let (reservation, previous) = state.withLock { state -> (Reservation?, Origin?) in
                if state.held == origin { return (nil, origin) }
                defer {
                    state.reservation = nil
                    state.held = nil
                }
                return (state.reservation, state.held)
            }
            if previous == origin { return }
            if let previous { limiter.release(for: previous) }
            // The reserved place counts only for the origin it was taken for.
            let place: Reservation
            if let reservation, reservation.origin == origin {
                place = reservation
            } else {
                if let reservation { limiter.giveUp(reservation) }
                place = limiter.reserve(for: origin, priority: priority)
            }
            queued(true)
            defer { queued(false) }
            try await limiter.acquire(place)
            state.withLock { $0.held = origin }
        }

        /// Runs `work` with the lease of one of the transfer's connections: this lease for
        /// connection 0, else one of its own for `connection` (the same scheduler, priority
        /// and queued report, no reservation), given back however `work` ends. A segmented
        /// download's further connections take their slots this way, so every lease of a
        /// transfer is made and given back here or by the transfer itself.
        func forConnection<Result>(
            _ connection: Int,
            _ work: (Lease) async throws -> Result
        ) async rethrows -> Result {
            guard connection != self.connection else { return try await work(self) }
            let lease = Lease(limiter, reservation: nil, priority: priority, connection: connection, queued: queued)
            defer { lease.release() }
            return try await work(lease)
        }

        /// Gives the slot back (and a reserved place never used), waking the next waiter.
        func release() {
            let (reservation, held) = state.withLock { state in
                defer {
                    state.reservation = nil
                    state.held = nil
                }
                return (state.reservation, state.held)
            }
            if let reservation { limiter.giveUp(reservation) }
            if let held { limiter.release(for: held) }
        }
    }
}
