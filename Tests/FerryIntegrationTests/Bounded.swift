import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What `body` returned, or `nil` when it had not returned within `seconds`.
///
/// For tests of calls that must come back: the bound is a generous ceiling on liveness
/// (tens of seconds for work of milliseconds), never a window a correct run could miss on a
/// busy machine. A body still running at the bound is cancelled (the test has already
/// failed; a ``poll(until:)`` in it stops), and the timer once the body returns.
func finishing<Value: Sendable>(
    within seconds: Double,
    _ body: @escaping @Sendable () async -> Value
) async -> Value? {
    let outcome = FirstOutcome<Value>()
    var started: [Task<Void, Never>] = []
    let value = await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
        outcome.wait(continuation)
        started = [
            Task { outcome.settle(await body()) },
            Task {
                try? await Task.sleep(for: .seconds(seconds))
                outcome.settle(nil)
            },
        ]
    }
    for task in started { task.cancel() }
    return value
}

/// Returns once `condition` holds, looking every 5 ms, or once the calling task is cancelled
/// (as ``finishing(within:_:)`` cancels a body that outlived its bound).
func poll(until condition: @Sendable () -> Bool) async {
    while !condition() {
        do { try await Task.sleep(for: .milliseconds(5)) } catch { return }
    }
}

/// The first of several outcomes, handed to one waiter.
private final class FirstOutcome<Value: Sendable>: Sendable {
    private let waiter = Mutex<CheckedContinuation<Value?, Never>?>(nil)

    func wait(_ continuation: CheckedContinuation<Value?, Never>) { waiter.withLock { $0 = continuation } }

    func settle(_ value: Value?) {
        let taken = waiter.withLock { waiter in
            defer { waiter = nil }
            return waiter
        }
        taken?.resume(returning: value)
    }
}

/// Counts how often a callback ran, and lets a test wait until it ran a number of times.
final class CallTally: Sendable {
    private struct State {
        var count = 0
        var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }
    private let state = Mutex(State())

    var count: Int { state.withLock { $0.count } }

    func record() {
        let ready = state.withLock { state in
            state.count += 1
            let count = state.count
            let ready = state.waiters.filter { $0.count <= count }.map(\.continuation)
            state.waiters.removeAll { $0.count <= count }
            return ready
        }
        for waiter in ready { waiter.resume() }
    }

    /// Whether the callback ran within `seconds` (see ``finishing(within:_:)``).
    func ran(within seconds: Double) async -> Bool { await ran(1, within: seconds) }

    /// Returns once the callback ran at least once.
    func firstCall() async { await calls(1) }

    /// Whether the callback ran at least `count` times within `seconds` (see
    /// ``finishing(within:_:)``).
    func ran(_ count: Int, within seconds: Double) async -> Bool {
        await finishing(within: seconds) { () -> Bool in
            await self.calls(count)
            return true
        } != nil
    }

    /// Returns once the callback ran at least `count` times.
    func calls(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ran = state.withLock { state in
                if state.count >= count { return true }
                state.waiters.append((count, continuation))
                return false
            }
            if ran { continuation.resume() }
        }
    }
}

/// The error `body` threw, or `nil` when it returned.
func thrownError(_ body: () async throws -> Void) async -> (any Error)? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}

/// Established TCP connections from a local client to `port` on this machine (read from
/// `/proc/net/tcp` and `tcp6`): a check that a call closed its connection that other tests
/// running in parallel cannot disturb.
///
/// Each table is read in one large `read` (see ``TCPTableSocket/all(in:)``); a count that must reach
/// some number is asked with ``establishedConnections(toPort:atLeast:)``, which reads again.
func establishedConnections(toPort port: Int) -> Int {
    connections(toPort: port, inState: "01")
}

/// Local clients' sockets to `port` in the kernel's TCP state `state` (`/proc/net/tcp`'s
/// `st`, in hex: `01` established, `02` SYN sent).
func connections(toPort port: Int, inState state: String) -> Int {
    TCPTableSocket.all().filter { $0.remotePort == port && $0.state == state }.count
}

/// Bytes local clients have written to `port` that the peer has not acknowledged (the
/// kernel's send queues): above 0 while a peer that does not read holds them up.
func unacknowledgedBytes(toPort port: Int) -> Int {
    TCPTableSocket.all().filter { $0.remotePort == port }.map(\.sendQueue).reduce(0, +)
}

/// Whether at least `minimum` connections to `port` are established, reading the tables
/// again (up to a ceiling of 10 s) while fewer are seen.
func establishedConnections(toPort port: Int, atLeast minimum: Int) async -> Bool {
    for _ in 0..<400 {
        if establishedConnections(toPort: port) >= minimum { return true }
        try? await Task.sleep(for: .milliseconds(25))
    }
    return false
}
