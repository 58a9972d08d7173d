import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Per-host limit")
struct SchedulingTests {
    @Test func twentyDownloadsNeverUseMoreThanSixConnections() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 6 }
            let directory = try makeTemporaryDirectory()
            // Slow bodies keep every admitted download on its connection for a while.
            let tasks = (0..<20).map { index in
                session.downloadTask(
                    with: server.url("/bytes/40000?seed=\(index)&drip=10000&interval=20"),
                    to: .file(directory.appendingPathComponent("\(index).bin"))
                )
            }
            let results = try await withThrowingTaskGroup(of: FerryError?.self) { group in
                for task in tasks {
                    let events = task.events
                    group.addTask { await collectEvents(events).last?.completionError ?? nil }
                }
                for task in tasks { task.resume() }
                return try await group.reduce(into: [FerryError?]()) { $0.append($1) }
            }
            #expect(results.count == 20)
            #expect(results.allSatisfy { $0 == nil })
            for index in 0..<20 {
                let file = directory.appendingPathComponent("\(index).bin")
                #expect(try Data(contentsOf: file) == TestContent.data(size: 40_000, seed: UInt64(index)))
            }
            let stats = server.connectionStats
            #expect(stats.requests == 20)
            #expect(stats.peak == 6, "the server saw \(stats.peak) concurrent connections")
            #expect(stats.perClient.values.allSatisfy { $0.peak <= 6 })
        }
    }

    /// The indices of `tasks` in the order their responses arrived, once every task ended;
    /// `start` runs after every task's events are subscribed to.
    private func responseOrder(of tasks: [DataTask], start: () -> Void) async -> [Int] {
        let order = MutexBox<[Int]>([])
        await withTaskGroup(of: Void.self) { group in
            for (index, task) in tasks.enumerated() {
                let events = task.events
                group.addTask {
                    for await event in events {
                        if case .response = event { order.mutate { $0.append(index) } }
                    }
                }
            }
            start()
        }
        return order.value
    }

    @Test func waitingTasksStartInOrder() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 1 }
            let tasks = (0..<5).map { index in
                session.dataTask(with: server.url("/bytes/1000?drip=500&interval=10&seed=\(index)"))
            }
            let order = await responseOrder(of: tasks) { for task in tasks { task.resume() } }
            #expect(order == [0, 1, 2, 3, 4])
            #expect(server.connectionStats.peak == 1)
        }
    }

    /// Tasks waiting for an origin's one connection start by priority, then in the order
    /// they were resumed; the slot is held meanwhile by a streamed response nobody reads.
    @Test func waitingTasksStartByPriority() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 1 }
            let (holder, _) = try await session.bytes(from: server.url("/bytes/\(64 << 20)"))
            let priorities: [Float] = [0.2, 0.9, 0.5, 0.9, 0.2]
            let tasks = priorities.enumerated().map { index, priority in
                let task = session.dataTask(with: server.url("/bytes/1000?seed=\(index)"))
                task.priority = priority
                return task
            }
            let order = await responseOrder(of: tasks) {
                for task in tasks { task.resume() }
                holder.task.cancel()
            }
            // (No connection count here: the cancelled holder's socket may still be closing
            // when the first waiter connects.)
            #expect(order == [1, 3, 2, 0, 4])
        }
    }

    /// A download whose body is in holds no slot while its file is handed over: the next
    /// task starts while the delegate still has the file (URLSession frees the connection
    /// when the body ends, too). Before, the slot stayed held through the flush, checksum,
    /// `didFinishDownloadingTo` and the move, and a slow delegate kept every waiting task
    /// of the origin from starting.
    @Test func aFinishedBodyFreesItsSlotBeforeTheFileIsHandedOver() async throws {
        final class HoldsTheFile: SessionDelegate {
            let nextTaskResponded = DispatchSemaphore(value: 0)
            let heldUntilTheNextResponded = MutexBox<Bool?>(nil)
            func session(_ session: Session, downloadTask: DownloadTask, didFinishDownloadingTo location: URL) {
                // Bounded: if the slot were still held, the next task could not respond.
                let responded = nextTaskResponded.wait(timeout: .now() + 20) == .success
                heldUntilTheNextResponded.mutate { $0 = responded }
            }
        }
        try await withServer { server in
            let delegate = HoldsTheFile()
            let session = try makeSession(delegate: delegate) { $0.httpMaximumConnectionsPerHost = 1 }
            let download = session.downloadTask(with: URLRequest(url: server.url("/bytes/100000")))
            let next = session.dataTask(with: server.url("/bytes/10"))
            let downloadEvents = download.events
            let nextEvents = next.events
            download.resume()
            next.resume()
            for await event in nextEvents {
                if case .response = event { delegate.nextTaskResponded.signal() }
            }
            _ = await collectEvents(downloadEvents)
            #expect(delegate.heldUntilTheNextResponded.value == true)
            #expect(download.error == nil && next.error == nil)
            #expect(server.connectionStats.peak == 1)
        }
    }

    /// A slot given up starts the next queued transfer on the giving thread (until that one
    /// suspends). Queued downloads that each fail at once (their destination's folder is a
    /// file) hand the slot on one after another: every one ends with its own error, none is
    /// left waiting, and the slot is free again afterwards.
    @Test(.timeLimit(.minutes(2)))
    func queuedDownloadsThatFailAtOnceAllEndAndFreeTheSlot() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 1 }
            let directory = try makeTemporaryDirectory()
            let notAFolder = directory.appendingPathComponent("file")
            try Data("x".utf8).write(to: notAFolder)
            // Holds the slot while the others queue behind it.
            let first = session.dataTask(with: server.url("/bytes/2000?drip=1000&interval=100"))
            let failing = (0..<500).map { index in
                session.downloadTask(
                    with: server.url("/bytes/10"),
                    to: .file(notAFolder.appendingPathComponent("\(index).bin"))
                )
            }
            let firstEvents = first.events
            let failingEvents = failing.map(\.events)
            first.resume()
            for task in failing { task.resume() }
            _ = await collectEvents(firstEvents)
            var errors: [FerryError?] = []
            for events in failingEvents { errors.append(await collectEvents(events).last?.completionError ?? nil) }
            #expect(first.error == nil)
            #expect(errors.count == 500)
            #expect(errors.allSatisfy { $0 != nil && $0?.reason != .cancelled })
            let after = try await session.data(from: server.url("/bytes/10"))
            #expect(after.0.count == 10)
            #expect(server.connectionStats.peak == 1)
        }
    }

    @Test func cancellingAWaitingTaskFreesNoSlotItDidNotHold() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 1 }
            let first = session.dataTask(with: server.url("/bytes/2000?drip=1000&interval=100"))
            let waiting = session.dataTask(with: server.url("/bytes/10"))
            let third = session.dataTask(with: server.url("/bytes/10"))
            let firstEvents = first.events
            let waitingEvents = waiting.events
            let thirdEvents = third.events
            first.resume()
            try await Task.sleep(for: .milliseconds(50))
            waiting.resume()
            third.resume()
            try await Task.sleep(for: .milliseconds(20))
            waiting.cancel()
            let waitingEnd = await collectEvents(waitingEvents).last?.completionError ?? nil
            #expect(waitingEnd?.reason == .cancelled)
            _ = await collectEvents(firstEvents)
            _ = await collectEvents(thirdEvents)
            #expect(first.error == nil && third.error == nil)
            #expect(server.connectionStats.peak == 1)
        }
    }

    /// Issue 14.4: a task asleep before a retry holds no slot. With a limit of one, a
    /// download told by the server to come back in an hour must not keep another task to the
    /// same host from running meanwhile.
    @Test func aTaskSleepingBeforeARetryHoldsNoSlot() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 1 }
            let sleeper = try await startSleeper(in: session, server: server)
            // The bound only turns a hang into a failure; the other task needs milliseconds.
            let other: Data? = try await withThrowingTaskGroup(of: Data?.self) { group in
                group.addTask { try await session.data(from: server.url("/bytes/10")).0 }
                group.addTask {
                    try await Task.sleep(for: .seconds(120))
                    return nil
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            #expect(other == TestContent.data(size: 10, seed: 0), "the other task never got the slot")
            #expect(sleeper.state == .running)
            let ending = sleeper.events
            sleeper.cancel()
            let end = await collectEvents(ending).last?.completionError ?? nil
            #expect(end?.reason == .cancelled)
        }
    }

    /// Waiting out a retry's delay is not idleness: a server's `Retry-After` longer than the
    /// idle timeout must not fail the task. (The check runs after twice the idle timeout: a
    /// slower machine only makes it stricter. The timeout is long enough for the 503 to be
    /// handled on a machine whose every test shares two cores: 4 s was not, once.)
    @Test func waitingBeforeARetryIsNotIdleness() async throws {
        try await withServer { server in
            let session = try makeSession { $0.timeoutIntervalForRequest = 10 }
            let sleeper = try await startSleeper(in: session, server: server)
            try await Task.sleep(for: .seconds(21))
            #expect(sleeper.state == .running, "the task ended: \(String(describing: sleeper.error))")
            let ending = sleeper.events
            sleeper.cancel()
            let end = await collectEvents(ending).last?.completionError ?? nil
            #expect(end?.reason == .cancelled)
        }
    }

    /// A download the server tells to come back in an hour (503 with `Retry-After: 3600`),
    /// returned once it has gone to sleep before its retry.
    private func startSleeper(in session: Session, server: FerryTestServer) async throws -> DownloadTask {
        let sleeper = session.downloadTask(
            with: server.url("/bytes/1000?fail-first=1&retry-after=3600"),
            to: .file(try makeTemporaryDirectory().appendingPathComponent("later.bin"))
        )
        sleeper.retryPolicy = RetryPolicy(maximumRetries: 1, maximumRetryAfter: 3600)
        let events = sleeper.events
        sleeper.resume()
        var retrying = false
        for await event in events {
            if case .willRetry(_, let delay, let error) = event {
                // The server's answer, not a timeout, sent it to sleep for an hour.
                #expect(error.reason == .unacceptableStatusCode(503))
                #expect(delay == 3600)
                retrying = true
                break
            }
        }
        #expect(retrying, "the download ended before its retry: \(String(describing: sleeper.error))")
        return sleeper
    }
}
