package import Ferry
package import Foundation
import GRDB

/// Lists of tasks that page, and counts that are read, not computed: what `ferry ls`, the
/// web page and the metrics ask for, in time that grows with the page (and log N), not
/// with the store.
///
/// The counts live in `task_count`, one row per session and state, kept by triggers in the
/// transaction of every insert, state change and delete (migration `v5`): a total is a
/// read of a handful of rows whatever the store holds. A page is a range of an index on
/// `(state, id)` (or `(session, state, id)`), from a cursor: the last id the previous page
/// showed.
extension BackgroundStore {
    /// The table of counts, its triggers, and the indexes pages and the retention read
    /// (migration `v5`); the counts start from the tasks already stored.
    static func createListObjects(_ db: Database) throws {
        try db.execute(
            sql: """
                CREATE TABLE task_count (
                    session TEXT NOT NULL,
                    state TEXT NOT NULL,
                    n INTEGER NOT NULL,
                    PRIMARY KEY (session, state)
                ) WITHOUT ROWID;
                INSERT INTO task_count (session, state, n)
                    SELECT session, state, COUNT(*) FROM task GROUP BY session, state;
                CREATE TRIGGER task_count_insert AFTER INSERT ON task BEGIN
                    INSERT INTO task_count (session, state, n) VALUES (new.session, new.state, 1)
                        ON CONFLICT (session, state) DO UPDATE SET n = n + 1;
                END;
                CREATE TRIGGER task_count_delete AFTER DELETE ON task BEGIN
                    UPDATE task_count SET n = n - 1 WHERE session = old.session AND state = old.state;
                END;
                CREATE TRIGGER task_count_update AFTER UPDATE OF state, session ON task
                WHEN old.state IS NOT new.state OR old.session IS NOT new.session BEGIN
                    UPDATE task_count SET n = n - 1 WHERE session = old.session AND state = old.state;
                    INSERT INTO task_count (session, state, n) VALUES (new.session, new.state, 1)
                        ON CONFLICT (session, state) DO UPDATE SET n = n + 1;
                END;
                CREATE INDEX task_session_state ON task(session, state);
                CREATE INDEX task_finished ON task(finishedAt)
                    WHERE state IN ('completed', 'failed', 'canceled');
                CREATE INDEX event_task ON event(taskId);
                CREATE INDEX event_session_created ON event(session, createdAt);
                """
        )
    }

    /// How many tasks are in each state: of `session`, or of every session.
    package func counts(session: String? = nil) throws -> [BackgroundTaskRecord.State: Int] {
        try database.read { db in try Self.counts(db, session: session) }
    }

    static func counts(_ db: Database, session: String?) throws -> [BackgroundTaskRecord.State: Int] {
        let rows =
            if let session {
                try Row.fetchAll(db, sql: "SELECT state, n FROM task_count WHERE session = ?", arguments: [session])
            } else {
                try Row.fetchAll(db, sql: "SELECT state, SUM(n) AS n FROM task_count GROUP BY state")
            }
        var counts: [BackgroundTaskRecord.State: Int] = [:]
        for row in rows {
            guard let state = BackgroundTaskRecord.State(rawValue: row["state"]), let n: Int = row["n"], n > 0
            else { continue }
            counts[state] = n
        }
        return counts
    }

    /// What a page of tasks is cut from.
    package struct PageQuery: Sendable, Equatable {
        /// The states listed, in this order: every task of the first, then of the next…
        package var states: [BackgroundTaskRecord.State]
        /// Only this session's tasks; `nil`: every session's.
        package var session: String?
        /// Where the previous page stopped; `nil`: from the start.
        package var after: Cursor?
        /// At most this many tasks.
        package var limit: Int
        /// Finished tasks only when they finished at or after this date; `nil`: all.
        package var finishedSince: Date?

        package init(
            states: [BackgroundTaskRecord.State] = BackgroundTaskRecord.State.allCases,
            session: String? = nil,
            after: Cursor? = nil,
            limit: Int
        ) {
            self.states = states
            self.session = session
            self.after = after
            self.limit = limit
        }
    }

    /// Where a page stopped: the last task it showed.
    ///
    /// With its state, the next page goes on exactly after it: the rest of that state's
    /// tasks, then the states after it. Without, every listed state's tasks with a greater
    /// id (exact for a list of one state).
    package struct Cursor: Sendable, Equatable {
        package var state: BackgroundTaskRecord.State?
        package var id: Int64

        package init(state: BackgroundTaskRecord.State? = nil, id: Int64) {
            self.state = state
            self.id = id
        }

        /// `STATE:ID` or `ID` (as `ferry ls --after` and the API's `after` take it).
        package init?(_ text: String) {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            guard let last = parts.last, let id = Int64(last), id >= 0, parts.count <= 2 else { return nil }
            if parts.count == 2 {
                guard let state = BackgroundTaskRecord.State(rawValue: String(parts[0])) else { return nil }
                self.state = state
            }
            self.id = id
        }

        /// `STATE:ID`, or `ID` without a state.
        package var text: String { state.map { "\($0.rawValue):\(id)" } ?? String(id) }
    }

    /// A page of tasks: those of `query.states` in that order, each state's by id, after
    /// the cursor, at most `query.limit`; and the counts of the session (or of all).
    package func page(
        _ query: PageQuery
    ) throws -> (tasks: [BackgroundTaskRecord], totals: [BackgroundTaskRecord.State: Int]) {
        try database.read { db in
            var tasks: [BackgroundTaskRecord] = []
            // With a cursor's state, the states before it were shown.
            // (a state the list does not hold: as a cursor without one).
            var states = query.states[...]
            var cursor = query.after
            if let state = cursor?.state {
                if let index = states.firstIndex(of: state) { states = states[index...] } else { cursor?.state = nil }
            }
            for state in states where tasks.count < query.limit {
                let after = cursor.map { $0.state == nil || $0.state == state ? $0.id : 0 } ?? 0
                var sql = "SELECT * FROM task WHERE state = ? AND id > ?"
                var arguments: StatementArguments = [state.rawValue, after]
                if let session = query.session {
                    sql += " AND session = ?"
                    arguments += [session]
                }
                if state.isFinal, let since = query.finishedSince {
                    sql += " AND finishedAt >= ?"
                    arguments += [since]
                }
                sql += " ORDER BY id LIMIT ?"
                arguments += [query.limit - tasks.count]
                tasks += try BackgroundTaskRecord.fetchAll(db, sql: sql, arguments: arguments)
            }
            return (tasks, try Self.counts(db, session: query.session))
        }
    }
}
