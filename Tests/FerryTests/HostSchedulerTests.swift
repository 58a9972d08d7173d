import Foundation
import Testing

@testable import Ferry

@Suite("HostScheduler")
struct HostSchedulerTests {
    let a = Origin(URL(string: "http://a.example")!)
    let b = Origin(URL(string: "http://b.example:8080")!)

    @Test func admitsUpToTheLimitThenQueuesInOrder() {
        var scheduler = HostScheduler(limit: 2)
        #expect(scheduler.acquire(.init(id: 1), for: a) == .proceed)
        #expect(scheduler.acquire(.init(id: 2), for: a) == .proceed)
        #expect(scheduler.acquire(.init(id: 3), for: a) == .wait)
        #expect(scheduler.acquire(.init(id: 4), for: a) == .wait)
        #expect(scheduler.running[a] == 2)
        #expect(scheduler.release(for: a) == .grant(.init(id: 3)))
        #expect(scheduler.release(for: a) == .grant(.init(id: 4)))
        #expect(scheduler.running[a] == 2)
        #expect(scheduler.release(for: a) == .none)
        #expect(scheduler.release(for: a) == .none)
        #expect(scheduler.running[a] == nil)
    }

    @Test func originsAreIndependent() {
        var scheduler = HostScheduler(limit: 1)
        #expect(scheduler.acquire(.init(id: 1), for: a) == .proceed)
        #expect(scheduler.acquire(.init(id: 2), for: b) == .proceed)
        #expect(scheduler.acquire(.init(id: 3), for: a) == .wait)
        #expect(scheduler.release(for: b) == .none)
        #expect(scheduler.release(for: a) == .grant(.init(id: 3)))
    }

    @Test func abandonedWaiterIsSkipped() {
        var scheduler = HostScheduler(limit: 1)
        _ = scheduler.acquire(.init(id: 1), for: a)
        _ = scheduler.acquire(.init(id: 2), for: a)
        _ = scheduler.acquire(.init(id: 3), for: a)
        #expect(scheduler.abandon(.init(id: 2), for: a) == .removed)
        #expect(scheduler.abandon(.init(id: 2), for: a) == .notWaiting)
        #expect(scheduler.abandon(.init(id: 1), for: a) == .notWaiting)
        #expect(scheduler.release(for: a) == .grant(.init(id: 3)))
    }

    @Test func higherPriorityWaitersGoFirstAndEqualOnesInOrder() {
        var scheduler = HostScheduler(limit: 1)
        #expect(scheduler.acquire(.init(id: 1, priority: 0.1), for: a) == .proceed)
        for (id, priority) in [(2, 0.2), (3, 0.9), (4, 0.5), (5, 0.9), (6, 0.2)] as [(Int, Float)] {
            #expect(scheduler.acquire(.init(id: id, priority: priority), for: a) == .wait)
        }
        var granted: [Int] = []
        while case .grant(let ticket) = scheduler.release(for: a) { granted.append(ticket.id) }
        #expect(granted == [3, 5, 4, 2, 6])
        // A high priority never jumps a free slot's rules: with room it proceeds, and another
        // origin's queue is not touched.
        #expect(scheduler.acquire(.init(id: 7, priority: 1), for: b) == .proceed)
    }

    @Test func newcomerDoesNotOvertakeWaiters() {
        var scheduler = HostScheduler(limit: 1)
        _ = scheduler.acquire(.init(id: 1), for: a)
        _ = scheduler.acquire(.init(id: 2), for: a)
        #expect(scheduler.release(for: a) == .grant(.init(id: 2)))
        #expect(scheduler.acquire(.init(id: 3), for: a) == .wait)
    }

    @Test func neverMoreThanTheLimitRunUnderRandomLoad() {
        var generator = SystemRandomNumberGenerator()
        for limit in 1...4 {
            var scheduler = HostScheduler(limit: limit)
            var holding: [HostScheduler.Ticket] = []
            var waiting: [HostScheduler.Ticket] = []
            var next = 0
            for _ in 0..<500 {
                if Bool.random(using: &generator) || holding.isEmpty {
                    next += 1
                    let ticket = HostScheduler.Ticket(id: next)
                    if scheduler.acquire(ticket, for: a) == .proceed {
                        holding.append(ticket)
                    } else {
                        waiting.append(ticket)
                    }
                } else {
                    holding.removeFirst()
                    if case .grant(let ticket) = scheduler.release(for: a) {
                        #expect(ticket == waiting.first)
                        waiting.removeFirst()
                        holding.append(ticket)
                    }
                }
                #expect(holding.count <= limit)
                #expect((scheduler.running[a] ?? 0) == holding.count)
            }
        }
    }
}
