import Testing

@testable import FerryBackground

/// When the daemon applies its retention after ends: every end for a small retention, an
/// eighth of the kept tasks (at most 256) for larger ones, and after a minute whatever the
/// count.
@Suite("PruneSchedule")
struct PruneScheduleTests {
    let start = ContinuousClock.now

    /// The ends (the first `count`) at which `schedule` says to prune.
    func pruningEnds(_ schedule: inout PruneSchedule, count: Int) -> [Int] {
        (1...count).filter { _ in
            let due = schedule.taskEnded(now: start)
            if due { schedule.pruned(now: start) }
            return due
        }
    }

    @Test func aSmallRetentionPrunesAtEveryEnd() {
        for keeps in [0, 1, 2, 7] {
            var schedule = PruneSchedule(keeps: keeps, now: start)
            #expect(schedule.ends == 1)
            #expect(pruningEnds(&schedule, count: 3) == [1, 2, 3])
        }
    }

    @Test func aLargerRetentionPrunesEveryEighthOfWhatItKeeps() {
        var schedule = PruneSchedule(keeps: 1000, now: start)
        #expect(schedule.ends == 125)
        #expect(pruningEnds(&schedule, count: 300) == [125, 250])
        #expect(schedule.endsSincePrune == 50)
    }

    @Test func aMillionKeptPrunesEvery256Ends() {
        var schedule = PruneSchedule(keeps: 1_000_000, now: start)
        #expect(schedule.ends == PruneSchedule.maximumEnds)
        #expect(pruningEnds(&schedule, count: 600) == [256, 512])
    }

    @Test func aMinutePrunesWhateverTheCount() {
        var schedule = PruneSchedule(keeps: 1_000_000, now: start)
        let early = schedule.taskEnded(now: start + .seconds(59))
        #expect(!early)
        let late = schedule.taskEnded(now: start + PruneSchedule.interval)
        #expect(late)
        schedule.pruned(now: start + PruneSchedule.interval)
        let after = schedule.taskEnded(now: start + PruneSchedule.interval + .seconds(1))
        #expect(!after)
    }
}
