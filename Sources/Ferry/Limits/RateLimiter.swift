import Synchronization

/// A bandwidth limit shared by whoever moves bytes under it: one task's connections (a
/// task's ``SessionTask/maximumBytesPerSecond``) or every task of a session
/// (``SessionConfiguration/maximumBytesPerSecond``). A ``RateSchedule`` behind one lock;
/// callers sleep for what it says.
///
/// Thread-safe. Sleeping holds nothing: the transfer simply stops reading (or sending) for a
/// while, and TCP slows the peer, so a limit costs no memory.
final class RateLimiter: Sendable {
    private let schedule: Mutex<RateSchedule>

    init(bytesPerSecond: Int64) {
        schedule = Mutex(RateSchedule(bytesPerSecond: bytesPerSecond))
    }

    /// Counts `bytes` that moved now, and sleeps as long as the limit asks.
    func pace(_ bytes: Int64) async throws {
        let wait = schedule.withLock { $0.reserve(bytes, now: .now) }
        if wait > .zero { try await Task.sleep(for: wait) }
    }
}

/// The limits one transfer's bytes move under: its task's and its session's.
struct Throttle: Sendable {
    let limiters: [RateLimiter]
    let task: SessionTask

    /// A throttle for `task` in a session with `shared`, or `nil` when nothing limits it.
    static func make(task: SessionTask, shared: RateLimiter?) -> Throttle? {
        let own = task.maximumBytesPerSecond.map { RateLimiter(bytesPerSecond: $0) }
        let limiters = [own, shared].compactMap { $0 }
        return limiters.isEmpty ? nil : Throttle(limiters: limiters, task: task)
    }

    /// Counts `bytes` against every limit; the time spent waiting is not idleness.
    func pace(_ bytes: Int64) async throws {
        task.client.setQueued(true)
        defer { task.client.setQueued(false) }
        for limiter in limiters { try await limiter.pace(bytes) }
    }
}
