import Foundation
import Testing

@testable import Ferry

/// The watchdog's rule for a process that did not run: a tick more than
/// ``Watchdog/stallAllowance`` late is a stall, and a stall moves the idle clocks on.
@Suite("Watchdog stalls")
struct WatchdogTests {
    @Test func aTickLateByMoreThanTheAllowanceIsAStall() {
        let due = ContinuousClock.now
        #expect(Watchdog.stall(due: due, woke: due) == nil)
        #expect(Watchdog.stall(due: due, woke: due + .milliseconds(300)) == nil)
        #expect(Watchdog.stall(due: due, woke: due + .milliseconds(1500)) == .milliseconds(1500))
        #expect(Watchdog.stall(due: due, woke: due + Watchdog.stallAllowance) == nil)
        #expect(Watchdog.stall(due: due, woke: due + .seconds(38)) == .seconds(38))
        // Early (a clock that never goes back cannot, but the rule holds): not a stall.
        #expect(Watchdog.stall(due: due, woke: due - .seconds(5)) == nil)
    }

    /// A stall moves the task's idle deadline on by its length, but never past now.
    @Test func aStallIsNotIdleness() async throws {
        let session = try Session(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let task = session.dataTask(with: try #require(URL(string: "http://127.0.0.1:9/never")))
        let idle = Duration.seconds(4)
        let resource = Duration.seconds(600)
        // The last activity (the task's creation) at least 300 ms ago: a later wake only makes
        // it older, which the checks below allow for.
        try await Task.sleep(for: .milliseconds(300))
        let before = try #require(task.client.timeoutDeadlines(idle: idle, resource: resource).idle)

        task.client.excuseStall(.milliseconds(200))
        let after = try #require(task.client.timeoutDeadlines(idle: idle, resource: resource).idle)
        #expect(after - before == .milliseconds(200), "the idle deadline moved on by the stall")

        // A stall longer than the time since the last activity moves it to now, not past.
        task.client.excuseStall(.seconds(3600))
        let capped = try #require(task.client.timeoutDeadlines(idle: idle, resource: resource).idle)
        #expect(capped > after)
        #expect(capped <= ContinuousClock.now + idle)
    }
}
