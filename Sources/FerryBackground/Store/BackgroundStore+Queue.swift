package import Ferry
package import Foundation
import GRDB

/// The queue, read through its indexes: what the scheduler needs at an add, an end, a
/// resume or a wake-up, in time that grows with log N (the store's tasks) and with the
/// free slots, not with N.
///
/// `BackgroundScheduler.decide` takes the head of the queue instead of the whole queue and
/// decides the same: it starts at most `free` of the eligible non-discretionary tasks, the
/// best first, and discretionary ones only when every eligible non-discretionary task fits.
/// The head holds the best `free + 1` eligible non-discretionary tasks (one more than fits
/// says whether they all fit), the best discretionary ones that could fill the rest, and
/// the queued task whose earliest start comes next (the scheduler's wake-up).
///
/// Indexes (migration `v4`): `task_ready` orders queued tasks without an earliest start by
/// discretionary, priority and age; `task_dated` orders those with one by that date. A
/// dated task whose date has passed is found by a range of `task_dated` and sorted with its
/// peers, so that cost grows with the dated tasks already due, which a scheduler that
/// starts them soon keeps small.
///
/// Its statements are cached by the connection (compiled once, not at every schedule).
extension BackgroundStore {
    /// The indexes the queue is read through.
    static func createQueueIndexes(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE INDEX task_ready ON task(isDiscretionary, priority DESC, id)
                    WHERE state = 'queued' AND earliestBeginDate IS NULL;
                CREATE INDEX task_dated ON task(earliestBeginDate)
                    WHERE state = 'queued' AND earliestBeginDate IS NOT NULL;
                """
        )
    }

    /// The head of the queue at `now` for `free` slots (see the type's discussion): the
    /// columns the scheduler reads, not whole records (those of the tasks it starts are read
    /// then).
    ///
    /// Its statements run without a transaction around them: the tasks they read change
    /// state only on the daemon's actor, which is where this is asked.
    package func queueHead(now: Date, free: Int) throws -> [BackgroundScheduler.Candidate] {
        try database.unsafeRead { db in try Batch(db).queueHead(now: now, free: free) }
    }

    /// The best `limit` queued tasks that may start at `now`, of one kind (discretionary or
    /// not): the undated ones by their index, merged with the dated ones already due.
    fileprivate static func eligible(
        _ db: Database,
        discretionary: Bool,
        now: Date,
        limit: Int
    ) throws -> [BackgroundScheduler.Candidate] {
        guard limit > 0 else { return [] }
        let undated = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(candidateColumns) FROM task INDEXED BY task_ready
                    WHERE state = 'queued' AND earliestBeginDate IS NULL AND isDiscretionary = ?
                    ORDER BY isDiscretionary, priority DESC, id LIMIT ?
                    """
            ),
            arguments: [discretionary, limit]
        )
        .map(candidate)
        let due = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT \(candidateColumns) FROM task INDEXED BY task_dated
                    WHERE state = 'queued' AND earliestBeginDate IS NOT NULL AND earliestBeginDate <= ?
                        AND isDiscretionary = ?
                    ORDER BY priority DESC, id LIMIT ?
                    """
            ),
            arguments: [now, discretionary, limit]
        )
        .map(candidate)
        guard !due.isEmpty else { return undated }
        let merged = (undated + due).sorted { lhs, rhs in
            lhs.priority != rhs.priority ? lhs.priority > rhs.priority : lhs.id < rhs.id
        }
        return Array(merged.prefix(limit))
    }

    /// What the scheduler reads of a queued task.
    fileprivate static let candidateColumns = "id, priority, earliestBeginDate, isDiscretionary"

    fileprivate static func candidate(_ row: Row) -> BackgroundScheduler.Candidate {
        BackgroundScheduler.Candidate(
            id: row["id"],
            priority: row["priority"],
            earliestBeginDate: row["earliestBeginDate"],
            isDiscretionary: row["isDiscretionary"]
        )
    }

    /// The tasks in `state`, oldest first (through the index on `state`).
    package func tasks(in state: BackgroundTaskRecord.State) throws -> [BackgroundTaskRecord] {
        try database.read { db in
            try BackgroundTaskRecord.filter(Column("state") == state.rawValue).order(Column("id")).fetchAll(db)
        }
    }
}

extension BackgroundStore.Batch {
    /// See ``BackgroundStore/queueHead(now:free:)``: in the batch's transaction.
    func queueHead(now: Date, free: Int) throws -> [BackgroundScheduler.Candidate] {
        let urgent = try BackgroundStore.eligible(db, discretionary: false, now: now, limit: free + 1)
        var head = urgent
        if urgent.count <= free {
            head += try BackgroundStore.eligible(db, discretionary: true, now: now, limit: free - urgent.count)
        }
        // The next earliest start still ahead: the scheduler's wake-up.
        if let next = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT \(BackgroundStore.candidateColumns) FROM task INDEXED BY task_dated
                    WHERE state = 'queued' AND earliestBeginDate IS NOT NULL AND earliestBeginDate > ?
                    ORDER BY earliestBeginDate LIMIT 1
                    """
            ),
            arguments: [now]
        ) {
            head.append(BackgroundStore.candidate(next))
        }
        return head
    }
}
