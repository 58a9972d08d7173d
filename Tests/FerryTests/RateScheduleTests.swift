import Testing

@testable import Ferry

@Suite("RateSchedule: a bandwidth limit as a value")
struct RateScheduleTests {
    @Test func bytesFasterThanTheRateWaitTheDifference() {
        var schedule = RateSchedule(bytesPerSecond: 1000)
        let start = ContinuousClock.now
        // A tenth of a second's worth goes at once (the bucket).
        #expect(schedule.reserve(100, now: start) == .zero)
        // One more second's worth at the same instant: wait a second.
        #expect(schedule.reserve(1000, now: start) == .seconds(1))
        // Waited, then half a second's worth: half a second more.
        #expect(schedule.reserve(500, now: start + .seconds(1)) == .milliseconds(500))
    }

    @Test func overTenSecondsTheAverageHoldsWhateverTheChunks() {
        var schedule = RateSchedule(bytesPerSecond: 1_000_000)
        var now = ContinuousClock.now
        let start = now
        var moved: Int64 = 0
        var sizes: [Int64] = [65_536, 1, 131_072, 4096, 999_999]
        while now - start < .seconds(10) {
            let size = sizes.removeFirst()
            sizes.append(size)
            moved += size
            // A sleep that overshoots by 3 ms each time is made up for.
            now = now + schedule.reserve(size, now: now) + .milliseconds(3)
        }
        let seconds = Double((now - start).components.seconds) + Double((now - start).components.attoseconds) / 1e18
        let rate = Double(moved) / seconds
        #expect(rate <= 1_000_000 * 1.05 && rate >= 1_000_000 * 0.95, "\(rate) bytes/s")
    }

    @Test func aPauseEarnsNoMoreThanTheBucket() {
        var schedule = RateSchedule(bytesPerSecond: 1000)
        let start = ContinuousClock.now
        _ = schedule.reserve(1000, now: start)
        // A minute idle, then two seconds' worth at once: only the bucket is free.
        #expect(schedule.reserve(2000, now: start + .seconds(60)) == .milliseconds(1900))
    }
}
