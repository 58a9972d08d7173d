package import Ferry
package import Foundation
import GRDB

/// The daemon's durable state: tasks, their resume data (checkpoints: bytes on disk,
/// validator, partial file), and the events not yet acknowledged, in one SQLite database in
/// WAL mode (`ferry.sqlite` in the state directory).
///
/// Every write is a transaction committed when the call returns, so a `kill -9` at any
/// moment leaves either the state before or the state after it. Commits go to the WAL
/// without a flush of their own (`synchronous = NORMAL`; checkpoints flush): a power loss or
/// a kernel crash can lose the last ones, never the database's consistency, as a partial
/// file keeps only its flushed bytes across boots. Safe to use from any thread; the
/// database serializes writers.
package final class BackgroundStore: Sendable {
    let database: DatabasePool
    /// Rings after every event recorded (``finish(_:as:detail:)``).
    package let events = EventBell()

    /// Opens (creating and migrating when needed) the store in `directory`.
    ///
    /// - Throws: ``FerryError/Reason/fileSystem`` when the database cannot be opened.
    package init(directory: URL) throws(FerryError) {
        do {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            chmod(directory.path, 0o700)
            // The store keeps request headers (credentials among them): it is its user's
            // alone. SQLite gives its -wal and -shm files the database file's mode.
            let path = directory.appendingPathComponent("ferry.sqlite").path
            let file = open(path, O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0o600)
            if file >= 0 {
                fchmod(file, 0o600)
                close(file)
            }
            for suffix in ["-wal", "-shm"] { chmod(path + suffix, 0o600) }
            var configuration = Configuration()
            configuration.busyMode = .timeout(10)
            // A flush per commit would cost a download of a small file three flushes.
            configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
            database = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(database)
        } catch {
            throw FerryError(.fileSystem, "Cannot open the daemon's store in '\(directory.path)'.", underlying: error)
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "session") { table in
                table.primaryKey("identifier", .text)
                table.column("createdAt", .datetime).notNull()
                table.column("lastAttachedAt", .datetime)
            }
            try db.create(table: "task") { table in
                table.autoIncrementedPrimaryKey("id")
                table.column("session", .text).notNull().indexed()
                table.column("kind", .text).notNull()
                table.column("method", .text)
                table.column("sourceFile", .text)
                table.column("responseStatus", .integer)
                table.column("responseHeaders", .text)
                table.column("url", .text).notNull()
                table.column("taskDescription", .text)
                table.column("headers", .text).notNull()
                table.column("destination", .text).notNull()
                table.column("state", .text).notNull().indexed()
                table.column("bytesReceived", .integer).notNull()
                table.column("bytesExpected", .integer)
                table.column("errorMessage", .text)
                table.column("priority", .double).notNull()
                table.column("earliestBeginDate", .datetime)
                table.column("isDiscretionary", .boolean).notNull()
                table.column("createdAt", .datetime).notNull()
                table.column("finishedAt", .datetime)
            }
            try db.create(table: "resume") { table in
                table.primaryKey("key", .text)
                table.column("data", .blob).notNull()
            }
            try db.create(table: "event") { table in
                table.autoIncrementedPrimaryKey("seq")
                table.column("session", .text).notNull().indexed()
                table.column("taskId", .integer).notNull()
                table.column("kind", .text).notNull()
                table.column("detail", .text)
                table.column("createdAt", .datetime).notNull()
            }
        }
        // Segmented downloads: the connections a task may use.
        migrator.registerMigration("v2") { db in
            try db.alter(table: "task") { table in table.add(column: "connections", .integer) }
        }
        // Input files: a download's mirrors (JSON) and its checksum.
        migrator.registerMigration("v3") { db in
            try db.alter(table: "task") { table in
                table.add(column: "mirrors", .text)
                table.add(column: "checksum", .text)
            }
        }
        // The queue read through indexes (BackgroundStore+Queue.swift), not the whole table.
        migrator.registerMigration("v4") { db in try createQueueIndexes(db) }
        // Counts kept by triggers, and the indexes of pages and of the retention
        // (BackgroundStore+Lists.swift).
        migrator.registerMigration("v5") { db in try createListObjects(db) }
        return migrator
    }

    /// Writes in `directory` the store an older release left: created and migrated up to
    /// `version` (`v1` … the latest) only, with `seed` (SQL) run after; what the upgrade
    /// tests start from.
    package static func createStore(in directory: URL, migratedUpTo version: String, seed: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let database = try DatabaseQueue(path: directory.appendingPathComponent("ferry.sqlite").path)
        try migrator.migrate(database, upTo: version)
        try database.write { db in try db.execute(sql: seed) }
    }

    // MARK: Tasks

    /// Stores a new task (and its session, the first time) and returns it with its id.
    package func insert(_ task: BackgroundTaskRecord) throws -> BackgroundTaskRecord {
        try insert([task])[0]
    }

    /// Stores new tasks (and their sessions, the first time) in one transaction, all or
    /// none, and returns them in order with their ids (increasing).
    package func insert(_ tasks: [BackgroundTaskRecord]) throws -> [BackgroundTaskRecord] {
        try database.write { db in
            let now = Date()
            for session in Set(tasks.map(\.session)) {
                try db.execute(
                    sql: "INSERT INTO session (identifier, createdAt) VALUES (?, ?) ON CONFLICT(identifier) DO NOTHING",
                    arguments: [session, now]
                )
            }
            var inserted = tasks
            for index in inserted.indices { try inserted[index].insert(db) }
            return inserted
        }
    }

    // MARK: Sessions

    /// Records when a process of `session` last asked for its events (the daemon calls it
    /// when it prunes, not on every poll: polling only reads).
    package func sessionAttached(_ session: String, at date: Date) throws {
        try database.write { db in
            try db.execute(
                sql: """
                    INSERT INTO session (identifier, createdAt, lastAttachedAt) VALUES (?, ?, ?)
                    ON CONFLICT(identifier) DO UPDATE SET lastAttachedAt = excluded.lastAttachedAt
                    """,
                arguments: [session, date, date]
            )
        }
    }

    /// Every session the daemon has tasks for, with its counts.
    package func sessions() throws -> [BackgroundAPI.SessionInfo] {
        try database.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT s.identifier, s.createdAt, s.lastAttachedAt,
                        (SELECT COALESCE(SUM(n), 0) FROM task_count c WHERE c.session = s.identifier) AS tasks,
                        (SELECT COUNT(*) FROM event e WHERE e.session = s.identifier) AS pendingEvents
                    FROM session s ORDER BY s.identifier
                    """
            ).map { row in
                BackgroundAPI.SessionInfo(
                    identifier: row["identifier"],
                    createdAt: row["createdAt"],
                    lastAttachedAt: row["lastAttachedAt"],
                    tasks: row["tasks"],
                    pendingEvents: row["pendingEvents"]
                )
            }
        }
    }

    /// Task `id`, or `nil`. One statement, cached, read without a transaction of its own
    /// (a statement sees one state of the database).
    package func task(_ id: Int64) throws -> BackgroundTaskRecord? {
        try database.unsafeRead { db in try Batch(db).task(id) }
    }

    /// Every task, or those of one session, oldest first.
    package func tasks(session: String? = nil) throws -> [BackgroundTaskRecord] {
        try database.read { db in
            var request = BackgroundTaskRecord.order(Column("id"))
            if let session { request = request.filter(Column("session") == session) }
            return try request.fetchAll(db)
        }
    }

    /// Sets a task's state alone, in one transaction (a task that starts: its row is not
    /// read back).
    package func setState(_ id: Int64, _ state: BackgroundTaskRecord.State) throws {
        try database.write { db in
            try db.cachedStatement(sql: "UPDATE task SET state = ? WHERE id = ?").execute(arguments: [
                state.rawValue, id,
            ])
        }
    }

    /// Marks the queued tasks `ids` running and returns them as stored, in one transaction
    /// of one cached statement each (a task's start writes its state and reads its row
    /// once). A task no longer queued (paused or canceled meanwhile) is left alone and not
    /// returned.
    package func start(_ ids: [Int64]) throws -> [BackgroundTaskRecord] {
        guard !ids.isEmpty else { return [] }
        return try batch { try $0.start(ids) }
    }

    /// Changes a task in one transaction; returns it as stored, or `nil` when it does not
    /// exist. `change` may throw to leave it untouched.
    @discardableResult
    package func update(
        _ id: Int64,
        _ change: @escaping @Sendable (inout BackgroundTaskRecord) throws -> Void
    ) throws -> BackgroundTaskRecord? {
        try batch { try $0.update(id, change) }
    }

    /// Ends a task and records its event in one transaction, so the event exists exactly
    /// when the state says it ended.
    ///
    /// - Parameters:
    ///   - detail: the event's detail (the file, or why it failed: then the task's error
    ///     message too).
    ///   - received: bytes the transfer moved, when it knows: the task's count becomes at
    ///     least that, and its expected count that when it had none.
    ///   - change: a change made to the task in the same transaction (the row is then read
    ///     and written whole; without one, only the columns an end touches are written).
    @discardableResult
    package func finish(
        _ id: Int64,
        as state: BackgroundTaskRecord.State,
        detail: String?,
        received: Int64? = nil,
        change: (@Sendable (inout BackgroundTaskRecord) -> Void)? = nil
    ) throws -> BackgroundEventRecord? {
        try batch { try $0.finish(id, as: state, detail: detail, received: received, change: change) }
    }

    // MARK: Events

    /// The events of `session` after sequence number `seq`, in order.
    package func events(session: String, after seq: Int64) throws -> [BackgroundEventRecord] {
        try database.read { db in
            try BackgroundEventRecord
                .filter(Column("session") == session && Column("seq") > seq)
                .order(Column("seq"))
                .fetchAll(db)
        }
    }

    /// Forgets the events of `session` up to and including `seq`: they were delivered.
    package func acknowledge(session: String, through seq: Int64) throws {
        try database.write { db in
            try db.execute(sql: "DELETE FROM event WHERE session = ? AND seq <= ?", arguments: [session, seq])
        }
    }
}

// MARK: Resume data

extension BackgroundStore: ResumeStorage {
    package func resumeData(for key: String) -> ResumeData? {
        entry(key).flatMap { try? ResumeData(decoding: $0) }
    }

    /// Stores the checkpoint, and the task's byte count with it.
    package func save(_ resumeData: ResumeData, for key: String) throws {
        try store(resumeData.encoded(), as: key, for: key, bytes: resumeData.bytesOnDisk, of: resumeData.totalLength)
    }

    /// Removes `key`'s entry; a write only when there is one (every download removes its
    /// entry at its end, and most small ones never saved any).
    package func remove(_ key: String) {
        guard entryExists(key) else { return }
        _ = try? database.write { db in
            try db.cachedStatement(sql: "DELETE FROM resume WHERE key = ?").execute(arguments: [key])
        }
    }

    /// Whether `entryKey` has an entry: one statement, read without a transaction of its own.
    private func entryExists(_ entryKey: String) -> Bool {
        (try? database.unsafeRead { db in
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM resume WHERE key = ?)"),
                arguments: [entryKey]
            )
        }) ?? true
    }

    /// An upload's entry shares the table, under a key of its own.
    static func uploadKey(_ key: String) -> String { "upload " + key }

    package func uploadResumeData(for key: String) -> UploadResumeData? {
        entry(Self.uploadKey(key)).flatMap { try? UploadResumeData(decoding: $0) }
    }

    /// Stores an upload's resume data, and the bytes the server acknowledged as the task's.
    package func save(_ resumeData: UploadResumeData, for key: String) throws {
        try store(
            resumeData.encoded(),
            as: Self.uploadKey(key),
            for: key,
            bytes: resumeData.bytesAcknowledged,
            of: resumeData.totalLength
        )
    }

    package func removeUpload(_ key: String) { remove(Self.uploadKey(key)) }

    /// The entry stored as `entryKey`.
    private func entry(_ entryKey: String) -> Data? {
        // One statement: it sees one state of the database without a transaction around it.
        try? database.unsafeRead { db in
            try Data.fetchOne(db.cachedStatement(sql: "SELECT data FROM resume WHERE key = ?"), arguments: [entryKey])
        }
    }

    /// Stores `data` as `entryKey`, and `bytes` of `total` as the count of the task whose
    /// resume key is `key`, in one transaction.
    private func store(_ data: Data, as entryKey: String, for key: String, bytes: Int64, of total: Int64?) throws {
        do {
            try database.write { db in
                try db.execute(
                    sql:
                        "INSERT INTO resume (key, data) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET data = excluded.data",
                    arguments: [entryKey, data]
                )
                if let id = BackgroundTaskRecord.id(forResumeKey: key) {
                    try db.execute(
                        sql: "UPDATE task SET bytesReceived = ?, bytesExpected = ? WHERE id = ?",
                        arguments: [bytes, total, id]
                    )
                }
            }
        } catch {
            throw FerryError(.fileSystem, "Cannot store a checkpoint in the daemon's store.", underlying: error)
        }
    }
}
