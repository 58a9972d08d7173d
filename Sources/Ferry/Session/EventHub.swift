import Synchronization

/// Fans a session's events out, in one global order, to the session-wide streams and to
/// the serial delivery context that calls the delegate and completion handlers.
///
/// ## Ordering
/// ``publish(_:)`` takes the hub's lock and yields to every consumer inside it, so every
/// consumer sees the same order. Callers publish while holding their task's lock (see
/// ``SessionTask``), which makes per-task order the order of the task's state changes. The
/// hub's lock is always the innermost lock: nothing is called under it but `yield`.
final class EventHub: Sendable {
    /// One unit of work for the delivery context.
    enum Delivery: Sendable {
        /// Hand an event to the delegate and handlers; resume `done` afterwards if given.
        case event(SessionEvent, done: CheckedContinuation<Void, Never>?)
        /// Run a decision (a delegate call whose answer a task awaits).
        case call(@Sendable () async -> Void)
    }

    private struct State {
        var subscribers: [Int: AsyncStream<SessionEvent>.Continuation] = [:]
        var nextSubscriber = 0
        var finished = false
    }

    private let state = Mutex(State())
    private let deliveries: AsyncStream<Delivery>.Continuation
    private let deliveryStream: AsyncStream<Delivery>

    /// Whether the session has a delegate: without one, a task's events need the delivery
    /// context only for a completion handler, and skip it otherwise (one thread hop fewer
    /// per event).
    let hasDelegate: Bool

    init(hasDelegate: Bool) {
        self.hasDelegate = hasDelegate
        (deliveryStream, deliveries) = AsyncStream.makeStream(of: Delivery.self)
    }

    /// A new stream of every event published from now on; it ends when the session is
    /// invalidated.
    func subscribe() -> AsyncStream<SessionEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionEvent.self)
        let id: Int? = state.withLock { state in
            guard !state.finished else { return nil }
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Whether anyone outside the task listens to the session's events.
    var hasSubscribers: Bool { state.withLock { !$0.subscribers.isEmpty } }

    /// Publishes an event to every subscriber and to the delivery context.
    func publish(_ event: SessionEvent, done: CheckedContinuation<Void, Never>? = nil, deliver: Bool = true) {
        state.withLock { state in
            for continuation in state.subscribers.values { continuation.yield(event) }
            guard deliver || done != nil else { return }
            if case .terminated = deliveries.yield(.event(event, done: done)) { done?.resume() }
        }
    }

    /// Queues a decision behind every event published so far; `false` once the delivery
    /// context has ended.
    func enqueue(_ call: @escaping @Sendable () async -> Void) -> Bool {
        if case .terminated = deliveries.yield(.call(call)) { return false }
        return true
    }

    /// Runs a delegate decision in the serial delivery context, behind every event
    /// published so far, and returns its answer; once the context has ended (the session is
    /// invalidated), runs it at once.
    func ask<Answer: Sendable>(_ decision: @escaping @Sendable () async -> Answer) async -> Answer {
        let box = Mutex<Answer?>(nil)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let call: @Sendable () async -> Void = {
                let answer = await decision()
                box.withLock { $0 = answer }
                continuation.resume()
            }
            if !enqueue(call) { continuation.resume() }
        }
        if let answer = box.withLock({ $0 }) { return answer }
        return await decision()
    }

    /// Starts the serial delivery context: one Swift task that runs every decision and hands
    /// every event to `deliver`, in order, until the hub finishes.
    ///
    /// - Parameter deliver: Hands an event to the session's delegate and handlers; returns
    ///   `false` once the session is gone, and a completed task's handler is then called
    ///   here, since it is still owed its call.
    func startDelivery(_ deliver: @escaping @Sendable (SessionEvent) -> Bool) {
        let stream = deliveryStream
        Task {
            for await delivery in stream {
                switch delivery {
                case .call(let decision):
                    await decision()
                case .event(let event, let done):
                    if !deliver(event), case .task(let task, .completed(let error)) = event {
                        task.client.takeCompletionHandler()?(task, error)
                    }
                    done?.resume()
                }
            }
        }
    }

    /// Publishes the session's last event and ends every stream.
    func finish(with event: SessionEvent) {
        // `finish()` runs `onTermination` synchronously, which takes this lock: end the
        // streams after leaving it. The last event is yielded inside, so order holds.
        let ended: [AsyncStream<SessionEvent>.Continuation] = state.withLock { state in
            guard !state.finished else { return [] }
            let subscribers = Array(state.subscribers.values)
            for continuation in subscribers { continuation.yield(event) }
            state.subscribers = [:]
            state.finished = true
            deliveries.yield(.event(event, done: nil))
            return subscribers
        }
        for continuation in ended { continuation.finish() }
        deliveries.finish()
    }
}
