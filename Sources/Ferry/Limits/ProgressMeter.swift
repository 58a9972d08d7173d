/// Counts one direction of a task's body bytes and publishes them coalesced in time (see
/// ``ProgressThrottle``): the one way a transfer feeds its task's byte counters.
///
/// ```swift
/// var meter = ProgressMeter(task: task, direction: .written)
/// for try await chunk in body { try write(chunk); meter.add(Int64(chunk.readableBytes)) }
/// meter.finish()  // the last event ends exactly at the total
/// ```
struct ProgressMeter: Sendable {
    let task: SessionTask
    let direction: TaskClient.ByteDirection
    private var throttle = ProgressThrottle()

    init(task: SessionTask, direction: TaskClient.ByteDirection) {
        self.task = task
        self.direction = direction
    }

    /// Counts `count` bytes; an event goes out when one is due, or now if `last` (the body's
    /// last bytes: its event must not wait for ``finish()``).
    mutating func add(_ count: Int64, last: Bool = false) {
        var due = throttle.add(count)
        if due == nil, last { due = throttle.flush() }
        task.client.didMove(direction, bytes: count, publish: due != nil, unpublished: due ?? 0)
    }

    /// Publishes the bytes no event covered yet.
    mutating func finish() {
        if let rest = throttle.flush() { task.client.didMove(direction, bytes: 0, publish: true, unpublished: rest) }
    }
}
