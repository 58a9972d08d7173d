import Ferry
import FerryBackground
import Foundation
import Testing

/// The daemon's queue read through its indexes (`BackgroundStore.queueHead`): the scheduler
/// decides over the head exactly what it decides over the whole queue, for queues of every
/// shape (priorities, discretionary tasks, earliest starts past and ahead, tasks in every
/// state) and every number of free slots. A real SQLite store in the test's folder.
@Suite("BackgroundStore: the queue's head")
struct BackgroundQueueTests {
    /// A small deterministic generator, so a failure names a queue that can be rebuilt.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    func candidates(_ tasks: [BackgroundTaskRecord]) -> [BackgroundScheduler.Candidate] {
        tasks.compactMap(BackgroundScheduler.Candidate.init)
    }

    @Test(arguments: 1...12)
    func theHeadDecidesAsTheWholeQueue(seed: Int) throws {
        var random = Generator(state: UInt64(seed))
        let store = try BackgroundStore(directory: try makeTemporaryDirectory("queue-\(seed)"))
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let priorities = [0.0, 0.25, 0.5, 0.5, 0.75, 1.0]
        for index in 0..<Int.random(in: 0...120, using: &random) {
            var task = BackgroundTaskRecord(
                session: "s",
                url: "http://h.test/\(index)",
                destination: "/tmp/\(index)",
                priority: priorities.randomElement(using: &random) ?? 0.5,
                earliestBeginDate: [nil, nil, -600, -1, 0, 1, 600].randomElement(using: &random)?
                    .map { now.addingTimeInterval($0) },
                isDiscretionary: Int.random(in: 0..<4, using: &random) == 0
            )
            let stored = try store.insert(task)
            task = stored
            let state = BackgroundTaskRecord.State.allCases.randomElement(using: &random) ?? .queued
            if state != .queued, Bool.random(using: &random), let id = task.id {
                try store.update(id) { $0.state = state }
            }
        }
        let whole = try store.tasks().filter { $0.state == .queued }
        let queued = Dictionary(uniqueKeysWithValues: candidates(whole).map { ($0.id, $0) })
        for limit in [1, 2, 4, 16] {
            let scheduler = BackgroundScheduler(limit: limit)
            for running in 0...limit {
                let free = max(0, limit - running)
                let head = try store.queueHead(now: now, free: free)
                #expect(head.count <= 2 * free + 2, "the head is bounded by the free slots, not the queue")
                // Queued tasks only, each as stored.
                #expect(head.allSatisfy { queued[$0.id] == $0 }, "seed \(seed): \(head)")
                #expect(
                    scheduler.decide(queued: head, running: running, now: now)
                        == scheduler.decide(queued: candidates(whole), running: running, now: now),
                    "seed \(seed), limit \(limit), running \(running)"
                )
            }
        }
    }

    @Test func theRunningAreFoundByTheirState() throws {
        let store = try BackgroundStore(directory: try makeTemporaryDirectory("queue-running"))
        var ids: [Int64] = []
        for index in 0..<5 {
            let task = try store.insert(
                BackgroundTaskRecord(session: "s", url: "http://h.test/\(index)", destination: "/tmp/\(index)")
            )
            ids.append(try #require(task.id))
        }
        try store.update(ids[1]) { $0.state = .running }
        try store.update(ids[3]) { $0.state = .running }
        #expect(try store.tasks(in: .running).compactMap(\.id) == [ids[1], ids[3]])
        #expect(try store.tasks(in: .queued).compactMap(\.id) == [ids[0], ids[2], ids[4]])
    }
}
