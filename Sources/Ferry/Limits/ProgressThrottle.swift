/// Coalesces progress events in time: at most one per ``interval``, and never loses bytes:
/// ``flush()`` hands out what is left so the last event ends exactly at the total.
struct ProgressThrottle: Sendable {
    static let interval: Duration = .milliseconds(50)

    private(set) var pending: Int64 = 0
    private var lastPublished: ContinuousClock.Instant?

    /// Adds `count` bytes; when an event is due, returns the bytes it covers.
    mutating func add(_ count: Int64, now: ContinuousClock.Instant = .now) -> Int64? {
        pending += count
        if let lastPublished, now - lastPublished < Self.interval { return nil }
        lastPublished = now
        defer { pending = 0 }
        return pending
    }

    /// The bytes not yet covered by an event, or `nil` when none are.
    mutating func flush() -> Int64? {
        guard pending > 0 else { return nil }
        defer { pending = 0 }
        return pending
    }
}
