import Ferry
import FerryBackground
import Foundation
import Testing

/// The store's counts (kept by triggers), its pages (ranges of indexes from a cursor), its
/// retention in bounded batches, and its upgrade from an older release's store. A real
/// SQLite store in the test's folder.
@Suite("BackgroundStore: counts, pages, retention, upgrades")
struct BackgroundStoreListTests {
    typealias State = BackgroundTaskRecord.State

    /// A store of `count` tasks over two sessions in seeded random states.
    func seeded(_ seed: Int, count: Int) throws -> BackgroundStore {
        var random = BackgroundQueueTests.Generator(state: UInt64(seed))
        let store = try BackgroundStore(directory: try makeTemporaryDirectory("lists-\(seed)"))
        for index in 0..<count {
            let task = BackgroundTaskRecord(
                session: Bool.random(using: &random) ? "a" : "b",
                url: "http://h.test/\(index)",
                destination: "/tmp/\(index)"
            )
            let id = try #require(try store.insert(task).id)
            switch State.allCases.randomElement(using: &random) ?? .queued {
            case .queued: break
            case let state where state.isFinal: try store.finish(id, as: state, detail: nil)
            case let state: try store.update(id) { $0.state = state }
            }
        }
        return store
    }

    /// What the counts must be: computed from every task.
    func counted(_ store: BackgroundStore, session: String? = nil) throws -> [State: Int] {
        var counts: [State: Int] = [:]
        for task in try store.tasks(session: session) { counts[task.state, default: 0] += 1 }
        return counts
    }

    @Test(arguments: 1...6)
    func theCountsFollowEveryInsertChangeAndRemoval(seed: Int) throws {
        let store = try seeded(seed, count: 80)
        for session in [nil, "a", "b"] {
            #expect(try store.counts(session: session) == counted(store, session: session))
        }
        // Moved between states, between sessions, removed.
        let tasks = try store.tasks()
        for task in tasks.prefix(10) { try store.update(task.id ?? 0) { $0.state = .paused } }
        for task in tasks.dropFirst(10).prefix(5) { try store.update(task.id ?? 0) { $0.session = "c" } }
        try store.removeFinished(session: "a")
        for session in [nil, "a", "b", "c"] {
            #expect(try store.counts(session: session) == counted(store, session: session))
        }
        try store.removeFinished()
        var keep = BackgroundStore.Retention()
        keep.maximumFinishedTasks = 0
        try store.prune(keep)
        #expect(try store.counts() == counted(store))
        #expect(try store.counts().keys.allSatisfy { !$0.isFinal })
    }

    /// Every page walked from the cursor its last task gives: every task exactly once, in
    /// the order of the states asked, each state's by id.
    @Test(arguments: [1, 3, 7, 50, 500])
    func pagesWalkTheListOnceInOrder(limit: Int) throws {
        let store = try seeded(limit, count: 120)
        for session in [nil, "a"] {
            for states in [State.allCases, [.running, .queued, .paused], [.completed], [.failed, .queued]] {
                let expected = try states.flatMap { state in
                    try store.tasks(session: session).filter { $0.state == state }.compactMap(\.id)
                }
                var walked: [Int64] = []
                var query = BackgroundStore.PageQuery(states: states, session: session, limit: limit)
                while true {
                    let page = try store.page(query)
                    #expect(page.tasks.count <= limit)
                    #expect(page.totals == (try counted(store, session: session)))
                    walked += page.tasks.compactMap(\.id)
                    guard page.tasks.count == limit, let last = page.tasks.last else { break }
                    query.after = BackgroundStore.Cursor(state: last.state, id: last.id ?? 0)
                    #expect(walked.count <= expected.count, "the walk does not end")
                    if walked.count > expected.count { break }
                }
                #expect(walked == expected, "\(states) of \(session ?? "every session") by \(limit)")
            }
        }
    }

    /// A cursor without a state: greater ids in every state asked (for one state, the next
    /// page); a cursor's state the list does not hold counts as none.
    @Test func aCursorWithoutItsStateGoesOnByID() throws {
        let store = try seeded(7, count: 60)
        let queued = try store.tasks().filter { $0.state == .queued }.compactMap(\.id)
        let middle = try #require(queued.dropFirst(queued.count / 2).first)
        var query = BackgroundStore.PageQuery(states: [.queued], limit: 1000)
        query.after = BackgroundStore.Cursor(id: middle)
        #expect(try store.page(query).tasks.compactMap(\.id) == queued.filter { $0 > middle })
        query.after = BackgroundStore.Cursor(state: .completed, id: middle)
        #expect(try store.page(query).tasks.compactMap(\.id) == queued.filter { $0 > middle })
        #expect(BackgroundStore.Cursor("queued:12") == BackgroundStore.Cursor(state: .queued, id: 12))
        #expect(BackgroundStore.Cursor("12") == BackgroundStore.Cursor(id: 12))
        #expect(BackgroundStore.Cursor(state: .failed, id: 3).text == "failed:3")
        for bad in ["", "queued:", ":12", "done:12", "12:queued", "-1", "a:b:1"] {
            #expect(BackgroundStore.Cursor(bad) == nil, "\(bad)")
        }
    }

    @Test func finishedSinceLeavesOlderFinishedTasksOut() throws {
        let store = try BackgroundStore(directory: try makeTemporaryDirectory("since"))
        var ids: [Int64] = []
        for index in 0..<4 {
            let id = try #require(
                try store.insert(
                    BackgroundTaskRecord(session: "s", url: "http://h.test/\(index)", destination: "/tmp/x")
                )
                .id
            )
            ids.append(id)
        }
        for id in ids.prefix(3) { try store.finish(id, as: .completed, detail: nil) }
        let old = Date(timeIntervalSinceNow: -7200)
        try store.update(ids[0]) { $0.finishedAt = old }
        var query = BackgroundStore.PageQuery(limit: 100)
        query.finishedSince = Date(timeIntervalSinceNow: -3600)
        #expect(try store.page(query).tasks.compactMap(\.id) == [ids[3], ids[1], ids[2]])
        query.finishedSince = nil
        #expect(try store.page(query).tasks.compactMap(\.id) == [ids[3], ids[0], ids[1], ids[2]])
    }

    /// Past the count, the oldest finished tasks go in batches (each says whether it was
    /// the last), with their events; a task whose event its session has not read stays.
    @Test func theRetentionRemovesInBoundedBatches() throws {
        let store = try BackgroundStore(directory: try makeTemporaryDirectory("prune"))
        var finished: [Int64] = []
        for index in 0..<30 {
            let id = try #require(
                try store.insert(
                    BackgroundTaskRecord(
                        session: BackgroundStore.commandLineSession,
                        url: "http://h.test/\(index)",
                        destination: "/tmp/x"
                    )
                ).id
            )
            try store.finish(id, as: index % 3 == 0 ? .failed : .completed, detail: nil)
            finished.append(id)
        }
        // An older finished task of a session that has not read its event.
        let unread = try #require(
            try store.insert(BackgroundTaskRecord(session: "app", url: "http://h.test/u", destination: "/tmp/u")).id
        )
        try store.finish(unread, as: .completed, detail: nil)
        try store.update(unread) { $0.finishedAt = Date(timeIntervalSinceNow: -60) }
        let queued = try #require(
            try store.insert(BackgroundTaskRecord(session: "app", url: "http://h.test/q", destination: "/tmp/q")).id
        )
        var keep = BackgroundStore.Retention()
        keep.maximumFinishedTasks = 5
        var batches: [BackgroundStore.Pruned] = []
        repeat {
            batches.append(try store.prune(keep, batch: 10))
        } while batches.last?.complete == false && batches.count < 10
        #expect(batches.map(\.tasks) == [10, 10, 6])
        #expect(batches.map(\.complete) == [false, false, true])
        let left = try store.tasks().compactMap(\.id)
        #expect(left == finished.suffix(4) + [unread, queued])
        #expect(try store.events(session: "cli", after: 0).map(\.taskId) == Array(finished.suffix(4)))
        #expect(try store.events(session: "app", after: 0).map(\.taskId) == [unread])
        #expect(try store.prune(keep, batch: 10) == BackgroundStore.Pruned(tasks: 0, complete: true))
        // Past the age: every finished task, whoever reads its events.
        let later = Date(timeIntervalSinceNow: keep.maximumAge + 60)
        #expect(try store.prune(keep, now: later, batch: 10) == BackgroundStore.Pruned(tasks: 5, complete: true))
        #expect(try store.tasks().compactMap(\.id) == [queued])
        #expect(try store.events(session: "app", after: 0).isEmpty)
        #expect(try store.counts() == [.queued: 1])
    }

    /// A store an older release wrote (migrated up to each earlier version, with tasks,
    /// events and a checkpoint in it) opens with every task, event and checkpoint kept, and
    /// counts and pages right.
    @Test(arguments: ["v1", "v2", "v3", "v4"])
    func anOlderStoreKeepsEveryTask(version: String) throws {
        let directory = try makeTemporaryDirectory("upgrade-\(version)")
        var seed = """
            INSERT INTO session (identifier, createdAt) VALUES ('cli', '2026-11-01 10:00:00.000');
            INSERT INTO resume (key, data) VALUES ('task-2', x'7B7D');
            INSERT INTO event (session, taskId, kind, detail, createdAt)
                VALUES ('cli', 3, 'completed', '/tmp/c', '2026-11-01 10:05:00.000');
            """
        let states = ["queued", "running", "completed", "paused", "failed"]
        for (index, state) in states.enumerated() {
            let finished = state == "completed" || state == "failed" ? "'2026-11-01 10:05:00.000'" : "NULL"
            seed += """
                INSERT INTO task (session, kind, url, headers, destination, state, bytesReceived, priority,
                    isDiscretionary, createdAt, finishedAt)
                VALUES ('cli', 'download', 'http://h.test/\(index)', '{}', '/tmp/\(index)', '\(state)', \(index * 10),
                    0.5, 0, '2026-11-01 10:00:00.000', \(finished));

                """
        }
        try BackgroundStore.createStore(in: directory, migratedUpTo: version, seed: seed)
        let store = try BackgroundStore(directory: directory)
        let tasks = try store.tasks()
        #expect(tasks.map(\.state.rawValue) == states)
        #expect(tasks.map(\.bytesReceived) == [0, 10, 20, 30, 40])
        #expect(tasks.map(\.url) == (0..<5).map { "http://h.test/\($0)" })
        #expect(try store.events(session: "cli", after: 0).map(\.taskId) == [3])
        #expect(try store.counts() == [.queued: 1, .running: 1, .completed: 1, .paused: 1, .failed: 1])
        #expect(try store.page(BackgroundStore.PageQuery(limit: 2)).tasks.map(\.state) == [.queued, .running])
        #expect(try store.queueHead(now: Date(), free: 4).map(\.id) == [1])
        #expect(try store.tasks(in: .running).compactMap(\.id) == [2])
        // The store goes on working: an insert is counted.
        _ = try store.insert(BackgroundTaskRecord(session: "cli", url: "http://h.test/n", destination: "/tmp/n"))
        #expect(try store.counts()[.queued] == 2)
    }

    /// A task with every field set, and one with none of the optional ones, read back as
    /// they were written: by id, in lists, in a page, and as a start returns them (the row
    /// decoder maps every column; a wrong or missing one differs here).
    @Test func everyColumnReadsBackAsWritten() throws {
        let store = try BackgroundStore(directory: try makeTemporaryDirectory("columns"))
        var full = BackgroundTaskRecord(
            session: "s",
            url: "https://h.test/a?b=c",
            headers: ["Authorization": "Bearer x", "X-Two": "2"],
            destination: "/tmp/a",
            priority: 0.75,
            earliestBeginDate: Date(timeIntervalSince1970: 1_800_000_000),
            isDiscretionary: true,
            createdAt: Date(timeIntervalSince1970: 1_790_000_000)
        )
        full.kind = .upload
        full.method = "PUT"
        full.sourceFile = "/tmp/source"
        full.responseStatus = 201
        full.responseHeaders = ["Location": "/up/1"]
        full.taskDescription = "the full one"
        full.bytesReceived = 12
        full.bytesExpected = 34
        full.errorMessage = "why"
        full.connections = 4
        full.mirrors = ["https://m1.test/a", "https://m2.test/a"]
        full.checksum = "sha256=00ff"
        full.finishedAt = Date(timeIntervalSince1970: 1_800_000_100)
        let bare = BackgroundTaskRecord(
            session: "s",
            url: "http://h.test/b",
            destination: "/tmp/b",
            createdAt: Date(timeIntervalSince1970: 1_790_000_001)
        )
        let written = try store.insert([full, bare])
        #expect(written.map(\.id) == [1, 2])
        for task in written { #expect(try store.task(task.id ?? 0) == task) }
        #expect(try store.tasks() == written)
        #expect(try store.page(BackgroundStore.PageQuery(limit: 10)).tasks == written)
        // A start returns the queued one running, and leaves a task not queued alone.
        try store.setState(1, .paused)
        var started = written[1]
        started.state = .running
        #expect(try store.start([1, 2]) == [started])
        #expect(try store.task(1)?.state == .paused)
    }
}
