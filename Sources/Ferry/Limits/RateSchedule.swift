/// A bandwidth limit as a value: given bytes that moved and the time, how long to wait so
/// that the average stays at the rate (a token bucket of a tenth of a second). No I/O, no
/// clock of its own: the owner passes the time in and sleeps for what it returns.
///
/// The schedule keeps the instant at which the bytes moved so far would have finished at
/// exactly the rate. Bytes may run ahead of that by the bucket; more wait the difference. A
/// sleep that overshoots by less than the bucket is made up for (the schedule, not the clock,
/// sets the pace), and a pause earns no more than the bucket, so over 10 s a limit holds
/// within about 1 %.
struct RateSchedule: Sendable, Equatable {
    /// Bytes per second.
    let rate: Int64
    /// When everything reserved so far is paid for.
    private(set) var paidUntil: ContinuousClock.Instant?

    init(bytesPerSecond rate: Int64) {
        self.rate = max(1, rate)
    }

    /// The bucket: how far ahead of the schedule bytes may run without waiting.
    var burst: Duration { .milliseconds(100) }

    /// Records that `bytes` moved at `now`; returns how long to wait before moving more.
    mutating func reserve(_ bytes: Int64, now: ContinuousClock.Instant) -> Duration {
        let cost = Duration.nanoseconds(Int64((Double(max(0, bytes)) / Double(rate) * 1e9).rounded(.up)))
        // Idle time earns nothing: the schedule starts again from now.
        let start = max(paidUntil ?? now, now)
        let paid = start + cost
        paidUntil = paid
        let ahead = paid - now - burst
        return ahead > .zero ? ahead : .zero
    }
}
