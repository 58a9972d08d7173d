import Synchronization

/// Something the ``Watchdog`` asks, every tick, to enforce its timeouts.
protocol TimeoutChecking: AnyObject, Sendable {
    /// Stops (or starts, to stop) the transfer when one of its timeouts is due; returns at
    /// once otherwise.
    func checkTimeouts()
}

/// Enforces the idle and resource timeouts of every running transfer of a session with one
/// ticking Swift task, instead of a timer task per transfer.
///
/// A transfer registers itself when it starts and leaves when it ends; a transfer queued
/// behind the per-host limit before its Swift task is made is registered by its
/// ``TransferHandle`` meanwhile. While any is registered, the ticker wakes every ``tick`` and
/// asks each one to check its deadlines (``Transfer/checkTimeouts()``, which stops an expired
/// transfer); with none left it ends, so an idle session costs nothing. A timeout fires at
/// most one tick late.
///
/// Thread-safe. The tick is an eighth of the shorter timeout, between 5 ms and 250 ms.
final class Watchdog: Sendable {
    private struct State {
        var transfers: [ObjectIdentifier: any TimeoutChecking] = [:]
        var ticking = false
    }

    private let state = Mutex(State())
    let tick: Duration

    init(idle: Double, resource: Double) {
        let shorter = min(idle, resource) / 8
        tick = .milliseconds(Int64(max(5, min(250, shorter * 1000))))
    }

    /// Starts watching `transfer`.
    func watch(_ transfer: any TimeoutChecking) {
        let start = state.withLock { state -> Bool in
            state.transfers[ObjectIdentifier(transfer)] = transfer
            defer { state.ticking = true }
            return !state.ticking
        }
        if start { Task { await self.run() } }
    }

    /// Stops watching `transfer`.
    func unwatch(_ transfer: any TimeoutChecking) {
        state.withLock { _ = $0.transfers.removeValue(forKey: ObjectIdentifier(transfer)) }
    }

    private func run() async {
        while true {
            try? await Task.sleep(for: tick)
            let transfers = state.withLock { state -> [any TimeoutChecking] in
                if state.transfers.isEmpty { state.ticking = false }
                return Array(state.transfers.values)
            }
            if transfers.isEmpty { return }
            for transfer in transfers { transfer.checkTimeouts() }
        }
    }
}
