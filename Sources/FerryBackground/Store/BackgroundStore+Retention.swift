package import Foundation
import GRDB

/// What the store forgets of tasks that ended, in bounded batches: a batch reads ranges of
/// indexes (`task_finished` by `finishedAt`, `event_task`, `event_session_created`) and the
/// finished count from `task_count`, so that its cost grows with what it removes, not with
/// the finished tasks kept. The daemon runs batches until one says it is complete.
extension BackgroundStore {
    /// What the store keeps of tasks that ended.
    package struct Retention: Sendable {
        /// Finished tasks (and their events) older than this go.
        package var maximumAge: TimeInterval = 7 * 86_400
        /// Beyond this many finished tasks, the oldest go: those whose events were
        /// delivered (or belong to `ferry add`, whose events nobody reads).
        package var maximumFinishedTasks = 1000

        package init() {}
    }

    /// What one batch of ``prune(_:now:batch:)`` did.
    package struct Pruned: Sendable, Equatable {
        /// Tasks removed.
        package var tasks: Int
        /// Whether nothing is left to remove: `false` when a part of the batch was cut at
        /// its size.
        package var complete: Bool

        package init(tasks: Int, complete: Bool) {
            self.tasks = tasks
            self.complete = complete
        }
    }

    /// The session `ferry add` uses: its events are never read, so never kept long.
    package static let commandLineSession = "cli"

    private static let final = "state IN ('completed', 'failed', 'canceled')"

    /// Removes, in one transaction, at most `batch` of each thing `retention` does not
    /// keep: finished tasks past their age, the oldest finished tasks past the count
    /// (those nobody still has to hear about), with their events; and `ferry add`'s events
    /// after a day.
    @discardableResult
    package func prune(_ retention: Retention, now: Date = Date(), batch: Int = 1000) throws -> Pruned {
        try database.write { db in
            var complete = true
            let cutoff = now.addingTimeInterval(-retention.maximumAge)
            let aged = try Int64.fetchAll(
                db,
                sql: "SELECT id FROM task INDEXED BY task_finished WHERE \(Self.final) AND finishedAt < ? LIMIT ?",
                arguments: [cutoff, batch]
            )
            complete = complete && aged.count < batch
            try Self.remove(aged, db)
            var removed = aged.count
            let finished = try Self.counts(db, session: nil).filter { $0.key.isFinal }.values.reduce(0, +)
            let excess = min(batch, finished - retention.maximumFinishedTasks)
            if excess > 0 {
                // The oldest first; a task whose events still wait for their session stays.
                let oldest = try Int64.fetchAll(
                    db,
                    sql: """
                        SELECT t.id FROM task t INDEXED BY task_finished
                        WHERE t.\(Self.final)
                          AND (t.session = ? OR NOT EXISTS (SELECT 1 FROM event e WHERE e.taskId = t.id))
                        ORDER BY t.finishedAt, t.id LIMIT ?
                        """,
                    arguments: [Self.commandLineSession, excess]
                )
                complete = complete && finished - oldest.count <= retention.maximumFinishedTasks
                try Self.remove(oldest, db)
                removed += oldest.count
            }
            // `ferry add`'s events are never read by the command; kept a day for people.
            try db.execute(
                sql: """
                    DELETE FROM event WHERE seq IN (
                        SELECT seq FROM event INDEXED BY event_session_created
                        WHERE session = ? AND createdAt < ? LIMIT ?
                    )
                    """,
                arguments: [Self.commandLineSession, now.addingTimeInterval(-86_400), batch]
            )
            complete = complete && db.changesCount < batch
            return Pruned(tasks: removed, complete: complete)
        }
    }

    /// Deletes the tasks `ids` and their events.
    private static func remove(_ ids: [Int64], _ db: Database) throws {
        guard !ids.isEmpty else { return }
        for ids in stride(from: 0, to: ids.count, by: 500).map({ ids[$0..<min($0 + 500, ids.count)] }) {
            let list = databaseQuestionMarks(count: ids.count)
            let arguments = StatementArguments(Array(ids))
            try db.execute(sql: "DELETE FROM event WHERE taskId IN (\(list))", arguments: arguments)
            try db.execute(sql: "DELETE FROM task WHERE id IN (\(list))", arguments: arguments)
        }
    }

    /// Removes every finished task (of `session`, or of all) and its events, now: `ferry
    /// clean`. Returns how many went.
    @discardableResult
    package func removeFinished(session: String? = nil) throws -> Int {
        try database.write { db in
            if let session {
                try db.execute(
                    sql: "DELETE FROM event WHERE taskId IN (SELECT id FROM task WHERE \(Self.final) AND session = ?)",
                    arguments: [session]
                )
                try db.execute(sql: "DELETE FROM task WHERE \(Self.final) AND session = ?", arguments: [session])
            } else {
                try db.execute(sql: "DELETE FROM event WHERE taskId IN (SELECT id FROM task WHERE \(Self.final))")
                try db.execute(sql: "DELETE FROM task WHERE \(Self.final)")
            }
            return db.changesCount
        }
    }
}
