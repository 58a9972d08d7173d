import Ferry
import Foundation
import GRDB

extension BackgroundStore {
    /// Several of the store's writes in one transaction: the daemon records the ends of the
    /// tasks that ended together, and starts the tasks they free, in one commit.
    ///
    /// A commit writes each page it changed to the WAL once: a task's row, the leaves of the
    /// indexes it leaves and joins, its session's counts, the event table's last page. Ends
    /// recorded one transaction each wrote the pages they share once per end (about ten
    /// pages, 40 KiB, for a task's end and the start it freed).
    ///
    /// Only inside ``BackgroundStore/batch(_:)``, on the thread that called it; each call
    /// does what the store's call of the same name does, without a transaction of its own.
    package struct Batch: ~Copyable {
        let db: Database
        /// Whether an event was recorded: the bell rings once the batch is committed.
        var recordedEvent = false

        init(_ db: Database) { self.db = db }
    }

    /// Runs `writes` in one transaction, committed when it returns (rolled back, nothing
    /// written, when it throws), and returns what it returns.
    ///
    /// - Throws: what `writes` throws, or the database's error when it cannot commit.
    package func batch<Value>(_ writes: (inout Batch) throws -> Value) throws -> Value {
        var recordedEvent = false
        let value = try database.write { db in
            var batch = Batch(db)
            let value = try writes(&batch)
            recordedEvent = batch.recordedEvent
            return value
        }
        if recordedEvent { events.ring() }
        return value
    }
}

// What each write does: the store's calls of the same names are each one batch of it.
extension BackgroundStore.Batch {
    /// See ``BackgroundStore/task(_:)``.
    func task(_ id: Int64) throws -> BackgroundTaskRecord? {
        try BackgroundTaskRecord.fetchOne(db.cachedStatement(sql: "SELECT * FROM task WHERE id = ?"), arguments: [id])
    }

    /// See ``BackgroundStore/start(_:)``.
    func start(_ ids: [Int64]) throws -> [BackgroundTaskRecord] {
        let statement = try db.cachedStatement(
            sql: "UPDATE task SET state = 'running' WHERE id = ? AND state = 'queued' RETURNING *"
        )
        return try ids.compactMap { id in try BackgroundTaskRecord.fetchOne(statement, arguments: [id]) }
    }

    /// See ``BackgroundStore/update(_:_:)``.
    @discardableResult
    func update(
        _ id: Int64,
        _ change: (inout BackgroundTaskRecord) throws -> Void
    ) throws -> BackgroundTaskRecord? {
        guard var task = try BackgroundTaskRecord.fetchOne(db, key: id) else { return nil }
        try change(&task)
        try task.update(db)
        return task
    }

    /// See ``BackgroundStore/finish(_:as:detail:received:change:)``.
    @discardableResult
    mutating func finish(
        _ id: Int64,
        as state: BackgroundTaskRecord.State,
        detail: String?,
        received: Int64? = nil,
        change: ((inout BackgroundTaskRecord) -> Void)? = nil
    ) throws -> BackgroundEventRecord? {
        let now = Date()
        let session: String
        if let change {
            guard var task = try BackgroundTaskRecord.fetchOne(db, key: id), !task.state.isFinal else { return nil }
            change(&task)
            task.state = state
            task.finishedAt = now
            if state == .failed { task.errorMessage = detail }
            if let received {
                task.bytesReceived = max(task.bytesReceived, received)
                task.bytesExpected = task.bytesExpected ?? received
            }
            try task.update(db)
            session = task.session
        } else {
            // The end of every download: one statement, no record read or written whole.
            let ended = try String.fetchOne(
                db.cachedStatement(
                    sql: """
                        UPDATE task SET state = ?, finishedAt = ?,
                            errorMessage = CASE WHEN ? THEN ? ELSE errorMessage END,
                            bytesReceived = MAX(bytesReceived, COALESCE(?, bytesReceived)),
                            bytesExpected = COALESCE(bytesExpected, ?)
                        WHERE id = ? AND state NOT IN ('completed', 'failed', 'canceled')
                        RETURNING session
                        """
                ),
                arguments: [state.rawValue, now, state == .failed, detail, received, received, id]
            )
            guard let ended else { return nil }
            session = ended
        }
        let key = BackgroundTaskRecord.resumeKey(for: id)
        try db.cachedStatement(sql: "DELETE FROM resume WHERE key IN (?, ?)")
            .execute(arguments: [key, BackgroundStore.uploadKey(key)])
        let kind: BackgroundEventRecord.Kind =
            switch state {
            case .completed: .completed
            case .canceled: .canceled
            default: .failed
            }
        var event = BackgroundEventRecord(session: session, taskId: id, kind: kind, detail: detail, createdAt: now)
        try db.cachedStatement(
            sql: "INSERT INTO event (session, taskId, kind, detail, createdAt) VALUES (?, ?, ?, ?, ?)"
        ).execute(arguments: [session, id, kind.rawValue, detail, now])
        event.seq = db.lastInsertedRowID
        recordedEvent = true
        return event
    }
}
