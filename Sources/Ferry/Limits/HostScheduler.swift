import NIOCore

/// Ferry's per-origin connection limit as a value: who may run now and who waits, in order.
///
/// No I/O happens here. ``HostLimiter`` owns one behind its lock and parks the waiting
/// tasks. A slot is handed from a finishing task straight to the next waiter, so the count of
/// running tasks per origin never exceeds ``limit``. Waiters start by priority, higher first
/// (``SessionTask/priority``), and in the order they asked among equal priorities.
struct HostScheduler: Sendable {
    /// One request for a slot.
    struct Ticket: Hashable, Sendable {
        var id: Int
        /// 0 … 1: a waiting ticket goes ahead of every waiting ticket of lower priority.
        var priority: Float = 0.5
    }

    let limit: Int
    private(set) var running: [Origin: Int] = [:]
    /// Each origin's waiting tickets in the order they will run. Changed in place (a
    /// thousand downloads queued at once must not copy the queue for each).
    private(set) var waiting: [Origin: CircularBuffer<Ticket>] = [:]

    init(limit: Int) {
        precondition(limit >= 1, "a per-host limit below 1 is rejected by SessionConfiguration")
        self.limit = limit
    }

    enum AcquireAction: Sendable, Equatable {
        /// The ticket holds a slot now.
        case proceed
        /// The ticket waits; ``release(for:)`` will grant it.
        case wait
    }

    mutating func acquire(_ ticket: Ticket, for origin: Origin) -> AcquireAction {
        let active = running[origin, default: 0]
        if active < limit && waiting[origin]?.isEmpty != false {
            running[origin] = active + 1
            return .proceed
        }
        // In place, not through `waiting[origin, default: []]`, whose accessors allocate.
        if waiting.modifyValue(forKey: origin, { $0.enqueue(ticket) }) == nil { waiting[origin] = [ticket] }
        return .wait
    }

    enum AbandonAction: Sendable, Equatable {
        /// The ticket was still waiting and is gone from the queue.
        case removed
        /// The ticket is not waiting (it was granted): its owner must ``release(for:)``.
        case notWaiting
    }

    /// A waiting ticket gives up (its task was cancelled).
    mutating func abandon(_ ticket: Ticket, for origin: Origin) -> AbandonAction {
        guard let index = waiting[origin]?.firstIndex(of: ticket) else { return .notWaiting }
        waiting[origin]?.remove(at: index)
        if waiting[origin]?.isEmpty == true { waiting[origin] = nil }
        return .removed
    }

    enum ReleaseAction: Sendable, Equatable {
        /// The slot is free.
        case none
        /// The slot passes to this waiting ticket, which may proceed.
        case grant(Ticket)
    }

    /// A task holding a slot for `origin` is done with it.
    mutating func release(for origin: Origin) -> ReleaseAction {
        if let next = waiting.modifyValue(forKey: origin, { $0.popFirst() }) ?? nil {
            if waiting[origin]?.isEmpty == true { waiting[origin] = nil }
            return .grant(next)
        }
        let active = running[origin, default: 0]
        precondition(active > 0, "release without a matching acquire")
        running[origin] = active > 1 ? active - 1 : nil
        return .none
    }
}

extension CircularBuffer<HostScheduler.Ticket> {
    /// Puts `ticket` after every ticket of the same or higher priority: first come, first
    /// served among equals. Searched from the back, where a ticket of the same priority goes.
    fileprivate mutating func enqueue(_ ticket: HostScheduler.Ticket) {
        guard let last = lastIndex(where: { $0.priority >= ticket.priority }) else {
            prepend(ticket)
            return
        }
        let place = index(after: last)
        // (`insert` rebuilds the buffer; most tickets go at the end.)
        if place == endIndex { append(ticket) } else { insert(ticket, at: place) }
    }
}
