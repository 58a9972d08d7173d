import Ferry
import FerryBackground
import Foundation
import Testing

@Suite("Background scheduler")
struct BackgroundSchedulerTests {
    let now = Date(timeIntervalSince1970: 1_000_000)

    func candidate(
        _ id: Int64,
        priority: Double = 0.5,
        after: TimeInterval? = nil,
        discretionary: Bool = false
    ) -> BackgroundScheduler.Candidate {
        .init(
            id: id,
            priority: priority,
            earliestBeginDate: after.map { now.addingTimeInterval($0) },
            isDiscretionary: discretionary
        )
    }

    @Test func startsOldestFirstUpToTheLimit() {
        let decision = BackgroundScheduler(limit: 2).decide(
            queued: [candidate(3), candidate(1), candidate(2)],
            running: 0,
            now: now
        )
        #expect(decision.start == [1, 2])
        #expect(decision.wakeAt == nil)
    }

    @Test func runningTasksTakeSlots() {
        let scheduler = BackgroundScheduler(limit: 3)
        #expect(scheduler.decide(queued: [candidate(1), candidate(2)], running: 2, now: now).start == [1])
        #expect(scheduler.decide(queued: [candidate(1)], running: 3, now: now).start.isEmpty)
        #expect(scheduler.decide(queued: [candidate(1)], running: 9, now: now).start.isEmpty)
    }

    @Test func higherPriorityFirst() {
        let decision = BackgroundScheduler(limit: 2).decide(
            queued: [candidate(1, priority: 0.1), candidate(2, priority: 0.9), candidate(3, priority: 0.5)],
            running: 0,
            now: now
        )
        #expect(decision.start == [2, 3])
    }

    @Test func earliestBeginDateHoldsATaskAndSetsTheWake() {
        let decision = BackgroundScheduler(limit: 4).decide(
            queued: [candidate(1, after: 60), candidate(2, after: 30), candidate(3), candidate(4, after: -5)],
            running: 0,
            now: now
        )
        #expect(decision.start == [3, 4])
        #expect(decision.wakeAt == now.addingTimeInterval(30))
        // At the date itself, it starts.
        let later = BackgroundScheduler(limit: 4).decide(
            queued: [candidate(2, after: 30)],
            running: 0,
            now: now.addingTimeInterval(30)
        )
        #expect(later.start == [2])
        #expect(later.wakeAt == nil)
    }

    @Test func discretionaryWorkWaitsForUrgentWork() {
        let scheduler = BackgroundScheduler(limit: 2)
        // Urgent work fills the slots first; the discretionary task waits even with a higher priority.
        let busy = scheduler.decide(
            queued: [candidate(1, priority: 1, discretionary: true), candidate(2), candidate(3)],
            running: 0,
            now: now
        )
        #expect(busy.start == [2, 3])
        // Urgent work waiting for a slot keeps discretionary work out.
        let waiting = scheduler.decide(
            queued: [candidate(1, discretionary: true), candidate(2), candidate(3), candidate(4)],
            running: 0,
            now: now
        )
        #expect(waiting.start == [2, 3])
        // Alone, it runs.
        let alone = scheduler.decide(queued: [candidate(1, discretionary: true)], running: 1, now: now)
        #expect(alone.start == [1])
    }

    @Test func aLimitBelowOneMeansOne() {
        #expect(
            BackgroundScheduler(limit: 0).decide(queued: [candidate(1), candidate(2)], running: 0, now: now).start == [
                1
            ]
        )
    }
}

@Suite("Background locations")
struct BackgroundLocationsTests {
    @Test func explicitThenVariablesThenXDG() {
        let explicit = BackgroundLocations(
            stateDirectory: "/a",
            socket: "/b.sock",
            environment: ["FERRY_STATE_DIR": "/c"]
        )
        #expect(explicit.stateDirectory.path == "/a")
        #expect(explicit.socket.path == "/b.sock")
        let variables = BackgroundLocations(environment: ["FERRY_STATE_DIR": "/c", "FERRY_SOCKET": "/d.sock"])
        #expect(variables.stateDirectory.path == "/c")
        #expect(variables.socket.path == "/d.sock")
        let xdg = BackgroundLocations(environment: ["XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": "/run/user/7"])
        #expect(xdg.stateDirectory.path == "/s/ferry")
        #expect(xdg.socket.path == "/run/user/7/ferry/daemon.sock")
        // A state directory named without a socket keeps the socket inside it.
        let stateOnly = BackgroundLocations(environment: ["FERRY_STATE_DIR": "/c", "XDG_RUNTIME_DIR": "/run/user/7"])
        #expect(stateOnly.socket.path == "/c/daemon.sock")
    }
}
