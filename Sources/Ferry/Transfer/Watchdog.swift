import Synchronization

/// Enforces the idle and resource timeouts of every running transfer of a session with one
/// ticking Swift task, instead of a timer task per transfer.
///
/// A transfer registers itself when it starts and leaves when it ends. While any is
/// registered, the ticker wakes every ``tick`` and asks each one to check its deadlines
/// (``Transfer/checkTimeouts()``, which stops an expired transfer); with none left it ends,
/// so an idle session costs nothing. On a machine that runs the ticker on time, a timeout
/// fires at most one tick late.
///
/// A tick that comes more than ``stallAllowance`` late means the process did not run: it was
/// stopped (`SIGSTOP`, a debugger), the machine slept, or its threads were starved. Bytes
/// may have arrived meanwhile that nobody could read, so that time is not idleness: each
/// transfer's idle clock is moved on by the delay (``Transfer/excuseStall(_:)``) before it is
/// judged. Ticks that are merely late on a loaded machine are not excused: an idle timeout
/// must still fire near its time there. The resource timeout, a limit on wall time, counts
/// every second.
///
/// Thread-safe. The tick is an eighth of the shorter timeout, between 5 ms and 250 ms.
final class Watchdog: Sendable {
    private struct State {
        var transfers: [ObjectIdentifier: Transfer] = [:]
        var ticking = false
    }

    private let state = Mutex(State())
    let tick: Duration
    /// How late a tick may come before the delay is taken for a stall of the process: far
    /// more than a loaded machine's lateness (a 100 ms allowance let a 1 s idle timeout
    /// stretch past 3 s under the whole suite's load).
    static let stallAllowance = Duration.seconds(1)

    init(idle: Double, resource: Double) {
        let shorter = min(idle, resource) / 8
        tick = .milliseconds(Int64(max(5, min(250, shorter * 1000))))
    }

    /// Starts watching `transfer`.
    func watch(_ transfer: Transfer) {
        let start = state.withLock { state -> Bool in
            state.transfers[ObjectIdentifier(transfer)] = transfer
            defer { state.ticking = true }
            return !state.ticking
        }
        if start { Task { await self.run() } }
    }

    /// Stops watching `transfer`.
    func unwatch(_ transfer: Transfer) {
        state.withLock { _ = $0.transfers.removeValue(forKey: ObjectIdentifier(transfer)) }
    }

    private func run() async {
        let clock = ContinuousClock()
        var due = clock.now + tick
        while true {
            try? await Task.sleep(until: due, clock: clock)
            let woke = clock.now
            let stall = Self.stall(due: due, woke: woke)
            due = woke + tick
            let transfers = state.withLock { state -> [Transfer] in
                if state.transfers.isEmpty { state.ticking = false }
                return Array(state.transfers.values)
            }
            if transfers.isEmpty { return }
            for transfer in transfers {
                if let stall { transfer.excuseStall(stall) }
                transfer.checkTimeouts()
            }
        }
    }

    /// How long the process did not run, when a tick due at `due` comes at `woke`: the
    /// delay, if it is more than ``stallAllowance``; otherwise `nil` (an ordinary tick).
    static func stall(due: ContinuousClock.Instant, woke: ContinuousClock.Instant) -> Duration? {
        let late = woke - due
        return late > stallAllowance ? late : nil
    }
}
