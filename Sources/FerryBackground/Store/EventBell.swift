import Synchronization

/// Rings when the store records an event, so a client's long poll (`GET /v1/events` with
/// `wait`) answers at once instead of the client asking again and again.
///
/// A waiter reads ``generation`` before it queries the store and waits only while no ring
/// came after that reading: an event recorded between the query and the wait is never
/// missed. Safe from any thread.
package final class EventBell: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// How many times the bell has rung.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Wakes every waiter.
    package func ring() {
        let waiters = state.withLock { state in
            state.generation += 1
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the bell rang after `generation` was read, when `timeout` passed, or
    /// when the calling task is cancelled.
    package func wait(past generation: UInt64, timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wait(past: generation) }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    private func wait(past generation: UInt64) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    guard state.generation == generation, !Task.isCancelled else { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
