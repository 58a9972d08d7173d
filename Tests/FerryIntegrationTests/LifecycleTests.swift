import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Task lifecycle", .serialized)
struct LifecycleTests {
    @Test func suspendStopsReadingAndResumeFinishes() async throws {
        try await withServer { server in
            let session = try makeSession()
            let size: Int64 = 64 << 20
            let target = try makeTemporaryDirectory().appendingPathComponent("big.bin")
            let task = session.downloadTask(with: server.url("/bytes/\(size)?seed=5"), to: .file(target))
            let events = task.events
            let firstWrite = MutexBox(false)
            let suspended = AsyncStream<Void>.makeStream()
            let collector = Task {
                var seen: [TaskEvent] = []
                for await event in events {
                    seen.append(event)
                    if case .wroteData = event,
                        firstWrite.mutate({ done in
                            defer { done = true }
                            return !done
                        })
                    {
                        task.suspend()
                        suspended.continuation.yield()
                    }
                }
                return seen
            }
            task.resume()
            var iterator = suspended.stream.makeAsyncIterator()
            await iterator.next()
            #expect(task.state == .suspended)
            // The transfer stops at its next buffer: what it still writes is bounded by what
            // was already read ahead, however late a loaded machine gets to it (a task that
            // kept reading would move hundreds of MiB a second on loopback).
            let atSuspend = task.countOfBytesReceived
            try await Task.sleep(for: .seconds(1))
            let later = task.countOfBytesReceived
            #expect(
                later - atSuspend <= 2 << 20,  // twice the 1 MiB the stream reads ahead
                "a suspended task kept reading: \(atSuspend) → \(later)"
            )
            #expect(later < size / 2, "back-pressure should hold the body at the server, not buffer it")
            task.resume()
            let seen = await collector.value
            #expect(task.error == nil)
            #expect(try await sha256(of: target) == TestContent.sha256(size: size, seed: 5))
            let names = seen.map(\.name)
            let suspendIndex = try #require(names.firstIndex(of: "suspended"))
            #expect(names[(suspendIndex + 1)...].first { $0 != "wroteData" } == "resumed")
        }
    }

    @Test func suspendedTaskDoesNotTimeOut() async throws {
        try await withServer { server in
            // An idle timeout a starved in-process server will not trip before the first
            // bytes; the suspension lasts three times as long.
            let session = try makeSession { $0.timeoutIntervalForRequest = 1 }
            // Far more than the event loop reads ahead (ResponseStream.readAhead), so that the
            // task cannot finish before it is suspended.
            let task = session.dataTask(with: server.url("/bytes/20000000"))
            let events = task.events
            task.resume()
            var iterator = events.makeAsyncIterator()
            while let event = await iterator.next() {
                if case .data = event { break }
            }
            task.suspend()
            try await Task.sleep(for: .seconds(3))
            #expect(task.state == .suspended)
            #expect(task.error == nil, "a suspended task timed out")
            // That a resumed task finishes is suspendStopsReadingAndResumeFinishes's part.
            task.cancel()
            while await iterator.next() != nil {}
            #expect(task.error?.reason == .cancelled)
        }
    }

    /// Many iterations of cancel / suspend / resume racing the network: every task completes
    /// exactly once, last; a success leaves the whole file, a failure leaves none.
    @Test func racingLifecycleCallsCompleteExactlyOnce() async throws {
        try await withServer { server in
            let session = try makeSession()
            let directory = try makeTemporaryDirectory()
            var outcomes = (success: 0, cancelled: 0)
            for iteration in 0..<300 {
                let target = directory.appendingPathComponent("\(iteration).bin")
                let size = Int64([0, 1, 1000, 200_000][iteration % 4])
                let task = session.downloadTask(with: server.url("/bytes/\(size)?seed=\(iteration)"), to: .file(target))
                let events = task.events
                let collector = Task { await collectEvents(events) }
                let script = Int.random(in: 0..<6)
                if script != 0 { task.resume() }
                if Bool.random() { try await Task.sleep(for: .microseconds(Int.random(in: 0..<3000))) }
                switch script {
                case 0, 1: task.cancel()
                case 2:
                    task.suspend()
                    task.cancel()
                case 3:
                    task.suspend()
                    task.resume()
                    task.cancel()
                case 4:
                    task.cancel()
                    task.resume()
                    task.cancel()
                default: break
                }
                let seen = await collector.value
                let completions = seen.filter { $0.name == "completed" }
                #expect(completions.count == 1, "iteration \(iteration): \(seen.map(\.name))")
                #expect(seen.last?.name == "completed")
                #expect(task.state == .completed)
                if task.error == nil {
                    outcomes.success += 1
                    #expect(try Data(contentsOf: target) == TestContent.data(size: size, seed: UInt64(iteration)))
                } else {
                    outcomes.cancelled += 1
                    #expect(task.error?.reason == .cancelled)
                    #expect(!FileManager.default.fileExists(atPath: target.path))
                }
            }
            #expect(outcomes.success > 0 && outcomes.cancelled > 0)
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
        }
    }

    @Test func cancellingTheSwiftTaskCancelsTheTransfer() async throws {
        try await withServer { server in
            let session = try makeSession()
            let work = Task { try await session.data(from: server.url("/bytes/100000?drip=1000&interval=50")) }
            try await Task.sleep(for: .milliseconds(100))
            work.cancel()
            await #expect {
                try await work.value
            } throws: { error in
                (error as? FerryError)?.reason == .cancelled
            }
            #expect(session.allTasks.isEmpty)
        }
    }

    @Test func invalidationFinishesRunningTasksThenRefusesNewOnes() async throws {
        try await withServer { server in
            let session = try makeSession()
            let stream = session.events
            let collector = Task {
                var names: [String] = []
                for await event in stream {
                    switch event {
                    case .task(_, let event): names.append(event.name)
                    case .didBecomeInvalid: names.append("invalid")
                    case .didFinishEventsForBackgroundSession: names.append("background events")
                    }
                }
                return names
            }
            let running = session.dataTask(with: server.url("/bytes/5000?drip=1000&interval=20"))
            running.resume()
            session.finishTasksAndInvalidate()
            let late = session.dataTask(with: server.url("/bytes/10"))
            #expect(late.state == .completed)
            #expect(late.error?.reason == .sessionInvalidated)
            let names = await collector.value
            #expect(names.last == "invalid")
            #expect(running.error == nil)
            #expect(running.receivedData?.count == 5000)
            #expect(names.filter { $0 == "completed" }.count == 2)
            await #expect {
                try await session.data(from: server.url("/bytes/1"))
            } throws: { error in
                (error as? FerryError)?.reason == .sessionInvalidated
            }
        }
    }

    @Test func invalidateAndCancelCancelsEverything() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 1 }
            let tasks = (0..<4).map { _ in session.dataTask(with: server.url("/bytes/100000?drip=1000&interval=50")) }
            let streams = tasks.map(\.events)
            for task in tasks { task.resume() }
            try await Task.sleep(for: .milliseconds(100))
            let invalid = session.events
            session.invalidateAndCancel()
            for stream in streams {
                let last = await collectEvents(stream).last
                #expect(last?.completionError??.reason == .cancelled)
            }
            var sawInvalid = false
            for await event in invalid { if case .didBecomeInvalid = event { sawInvalid = true } }
            #expect(sawInvalid)
        }
    }

    /// Issue 15.7: as with URLSession, invalidating the shared session has no effect (it
    /// would break every later user in the process).
    @Test func invalidatingTheSharedSessionHasNoEffect() async throws {
        try await withServer { server in
            Session.shared.invalidateAndCancel()
            Session.shared.finishTasksAndInvalidate()
            let (data, response) = try await Session.shared.data(from: server.url("/bytes/10"))
            #expect(response.statusCode == 200)
            #expect(data == TestContent.data(size: 10))
        }
    }
}

/// What a session keeps of the tasks it ran.
@Suite("What a session keeps")
struct RetentionTests {
    /// A session keeps no finished task: data, download and failed tasks are all released
    /// once they complete and their caller lets go, as URLSession's are (a process that runs
    /// one session for days, the daemon, must not grow with every transfer).
    @Test func aFinishedTaskIsReleased() async throws {
        try await withServer { server in
            let session = try makeSession()
            defer { session.invalidateAndCancel() }
            let folder = try makeTemporaryDirectory()
            weak var data: SessionTask?
            weak var download: SessionTask?
            weak var failed: SessionTask?
            do {
                let one = session.dataTask(with: server.url("/bytes/1000"))
                let two = session.downloadTask(
                    with: server.url("/bytes/100000"),
                    to: .file(folder.appendingPathComponent("f"))
                )
                let three = session.dataTask(with: server.url("/status/404"))
                data = one
                download = two
                failed = three
                for task in [one, two, three] {
                    let events = task.events
                    task.resume()
                    for await event in events { if case .completed = event { break } }
                }
            }
            // Released by the last of the transfer's own references as it ends.
            var left = 0
            for _ in 0..<2000 {
                left = [data, download, failed].compactMap { $0 }.count
                if left == 0 { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(left == 0, "data \(data != nil), download \(download != nil), failed \(failed != nil)")
        }
    }
}
