package import Ferry
package import Foundation

/// Which waiting background tasks start now, and when to look again: a pure decision over
/// the queue, with no I/O (the daemon performs it).
///
/// Rules, after nsurlsessiond's: a task never starts before its `earliestBeginDate`; higher
/// priority first, then the older; a discretionary task starts only when no
/// non-discretionary task is waiting or eligible; at most `limit` run at once (the
/// per-host limit is the engine's, which queues the rest per origin).
package struct BackgroundScheduler: Sendable, Equatable {
    /// A waiting task, as the scheduler needs it.
    package struct Candidate: Sendable, Equatable {
        package var id: Int64
        package var priority: Double
        package var earliestBeginDate: Date?
        package var isDiscretionary: Bool

        package init(id: Int64, priority: Double, earliestBeginDate: Date?, isDiscretionary: Bool) {
            self.id = id
            self.priority = priority
            self.earliestBeginDate = earliestBeginDate
            self.isDiscretionary = isDiscretionary
        }
    }

    /// What to do.
    package struct Decision: Sendable, Equatable {
        /// Start these, in this order.
        package var start: [Int64]
        /// Decide again at this time (the next `earliestBeginDate` that is not reached yet).
        package var wakeAt: Date?
    }

    package var limit: Int

    package init(limit: Int) { self.limit = max(1, limit) }

    /// - Parameters:
    ///   - queued: the waiting tasks (ids increase with age): the whole queue, or its head as
    ///     `BackgroundStore.queueHead(now:free:)` reads it, over which the decision is the same.
    ///   - running: how many run now.
    ///   - now: the time to decide at.
    package func decide(queued: [Candidate], running: Int, now: Date) -> Decision {
        let eligible = queued.filter { ($0.earliestBeginDate ?? .distantPast) <= now }
        let wakeAt = queued.compactMap(\.earliestBeginDate).filter { $0 > now }.min()
        let ordered = eligible.sorted { lhs, rhs in
            lhs.priority != rhs.priority ? lhs.priority > rhs.priority : lhs.id < rhs.id
        }
        let urgent = ordered.filter { !$0.isDiscretionary }
        var free = max(0, limit - running)
        var start: [Int64] = []
        for candidate in urgent where free > 0 {
            start.append(candidate.id)
            free -= 1
        }
        // Discretionary work only fills what urgent work leaves, and only when none waits.
        if urgent.count == start.count {
            for candidate in ordered where candidate.isDiscretionary && free > 0 {
                start.append(candidate.id)
                free -= 1
            }
        }
        return Decision(start: start, wakeAt: wakeAt)
    }
}

extension BackgroundScheduler.Candidate {
    /// `task` as the scheduler sees it; `nil` for a task not stored yet (no id).
    package init?(_ task: BackgroundTaskRecord) {
        guard let id = task.id else { return nil }
        self.init(
            id: id,
            priority: task.priority,
            earliestBeginDate: task.earliestBeginDate,
            isDiscretionary: task.isDiscretionary
        )
    }
}
