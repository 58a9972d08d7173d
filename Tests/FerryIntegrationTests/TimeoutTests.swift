import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Timeouts")
struct TimeoutTests {
    @Test func idleTimeoutFiresWhenNoByteMoves() async throws {
        try await withServer { server in
            // Wide margins: under the whole suite's load a loaded machine can stall for a few
            // hundred milliseconds, which must not look like the server going quiet.
            let session = try makeSession {
                $0.timeoutIntervalForRequest = 1
                $0.retryPolicy = .none
            }
            let directory = try makeTemporaryDirectory()
            // 100 bytes, then nothing until the client leaves.
            let task = session.downloadTask(
                with: server.url("/bytes/1000?stall-at=100"),
                to: .file(directory.appendingPathComponent("x"))
            )
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            let error = try #require(task.error, "a stalled download succeeded")
            #expect(error.reason == .timedOut(.idle))
            // The bytes that did arrive are kept for a resume, not delivered: exactly those the
            // task reported writing (on a loaded machine the timeout may even come first).
            let written: Int64 =
                seen.compactMap { event -> Int64? in
                    if case .wroteData(_, let total, _) = event { return total }
                    return nil
                }
                .max() ?? 0
            #expect(written == 0 || written == 100)
            #expect((error.resumeData?.bytesOnDisk ?? 0) == written)
            #expect(files(in: directory).isEmpty)
            // A response that waits before its head counts as idle too.
            await #expect {
                try await session.data(from: server.url("/bytes/10?delay=3000"))
            } throws: { error in
                (error as? FerryError)?.reason == .timedOut(.idle)
            }
        }
    }

    @Test func steadyTrickleIsNotIdle() async throws {
        try await withServer { server in
            // Six drips two seconds apart: the whole body takes longer than the idle timeout,
            // each gap a fifth of it. (Server and client share this process: starved beside a
            // loaded machine's other work, it was seen late by more than four seconds.)
            let session = try makeSession { $0.timeoutIntervalForRequest = 10 }
            let (data, _) = try await session.data(from: server.url("/bytes/600?drip=100&interval=2000"))
            #expect(data == TestContent.data(size: 600))
        }
    }

    @Test func resourceTimeoutBoundsTheWholeTask() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.timeoutIntervalForRequest = 5
                $0.timeoutIntervalForResource = 0.4
            }
            await #expect {
                try await session.data(from: server.url("/bytes/2000?drip=100&interval=50"))
            } throws: { error in
                (error as? FerryError)?.reason == .timedOut(.resource)
            }
        }
    }
}

@Suite("Timeouts and the per-host queue")
struct QueueTimeoutTests {
    @Test func waitingForAConnectionIsNotIdleness() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.httpMaximumConnectionsPerHost = 1
                // Long enough that the in-process server, starved on a loaded machine (the
                // whole suite beside one busy core), is not taken for idle.
                $0.timeoutIntervalForRequest = 15
            }
            // The first task takes the only slot and is suspended mid-body (a suspended task
            // keeps its connection and does not time out); the second waits in the queue for
            // longer than the idle timeout. (Only the lower bound of that wait matters: a
            // slower machine waits longer, which makes the check stricter, not flaky.)
            let first = session.dataTask(with: server.url("/bytes/20000000"))
            let second = session.dataTask(with: server.url("/bytes/10"))
            let firstEvents = first.events
            let secondEvents = second.events
            first.resume()
            var iterator = firstEvents.makeAsyncIterator()
            while let event = await iterator.next() {
                if case .data = event { break }
            }
            first.suspend()
            second.resume()
            try await Task.sleep(for: .seconds(16))
            #expect(second.error == nil, "a queued task timed out: \(String(describing: second.error))")
            #expect(second.receivedData == nil, "the second task ran beside the first")
            // The slot frees (the first task's own download is not the point here), and the
            // queued task runs.
            first.cancel()
            while await iterator.next() != nil {}
            _ = await collectEvents(secondEvents)
            #expect(first.error?.reason == .cancelled)
            #expect(second.error == nil, "a queued task timed out: \(String(describing: second.error))")
            #expect(second.receivedData == TestContent.data(size: 10))
        }
    }

    /// A task waiting for its slot has no Swift task of its own yet; its resource timeout
    /// still ends it, once, with the resource reason, and it sends nothing.
    @Test func aResourceTimeoutDueInTheQueueEndsTheTaskUnsent() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.httpMaximumConnectionsPerHost = 1
                $0.timeoutIntervalForRequest = 30
                $0.timeoutIntervalForResource = 1
            }
            // The holder's body takes 20 s; both tasks are resumed together, the second
            // waits behind the first, and both resource timeouts come due while it waits.
            let holder = session.dataTask(with: server.url("/bytes/2000?drip=10&interval=100"))
            let calls = CallTally()
            let failure = MutexBox<FerryError?>(nil)
            let queued = session.dataTask(with: URLRequest(url: server.url("/bytes/10?queued=1"))) { _, _, error in
                failure.mutate { $0 = error }
                calls.record()
            }
            let holderEvents = holder.events
            holder.resume()
            queued.resume()
            #expect(await calls.ran(within: 60), "the queued task's handler never ran")
            _ = await collectEvents(holderEvents)
            #expect(holder.error?.reason == .timedOut(.resource))
            #expect(failure.value?.reason == .timedOut(.resource), "\(String(describing: failure.value))")
            #expect(server.requests.filter { $0.uri.hasPrefix("/bytes/10?") }.isEmpty, "the queued task was sent")
            // A later task's handler runs after it in the same delivery context: by then a
            // second call of the first handler would have happened.
            let later = CallTally()
            session.dataTask(with: URLRequest(url: server.url("/bytes/1"))) { _, _, _ in later.record() }.resume()
            #expect(await later.ran(within: 60), "a later task's handler never ran")
            #expect(calls.count == 1)
        }
    }
}

@Suite("Limits against hostile servers")
struct HostileServerTests {
    @Test func tooManyOrTooLargeHeadersFailClearly() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (_, fine) = try await session.data(from: server.url("/many-headers?count=50&size=100"))
            #expect(fine.statusCode == 200)
            for query in ["count=500&size=1", "count=100&size=1000", "count=1&size=100000"] {
                await #expect {
                    try await session.data(from: server.url("/many-headers?\(query)"))
                } throws: { error in
                    (error as? FerryError)?.reason == .badServerResponse
                }
            }
            // CR or LF in a header value never reaches the server: Foundation's URLRequest drops
            // such a value, and Ferry refuses any that gets through (unit-tested).
            var request = URLRequest(url: server.url("/echo"))
            request.setValue("a\r\nInjected: yes", forHTTPHeaderField: "X-Bad")
            _ = try? await session.data(for: request)
            #expect(
                server.requests(to: "/echo").allSatisfy { $0.headers["injected"] == nil && $0.headers["x-bad"] == nil }
            )
        }
    }
}

@Suite("Compressed responses")
struct DecompressionTests {
    @Test func dataTasksDecodeAndABombFails() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.automaticDecompression = true
                $0.maximumInMemoryBodySize = 10_000_000
            }
            let (data, response) = try await session.data(from: server.url("/gzip/100000"))
            #expect(data == TestContent.data(size: 100_000))
            #expect(["gzip", "deflate"].contains(response.headers["Content-Encoding"] ?? ""))
            #expect(server.requests(to: "/gzip").last?.headers["accept-encoding"] == ContentDecoder.acceptEncoding)
            let (zeros, _) = try await session.data(from: server.url("/gzip/50000?zeros"))
            #expect(zeros == Data(count: 50000))
            // 20 MB of zeros arrive as about 20 KB: refused while inflating past the 10 MB limit.
            await #expect {
                try await session.data(from: server.url("/gzip/20000000?zeros"))
            } throws: { error in
                (error as? FerryError)?.reason == .badServerResponse
            }
            // Downloads keep the bytes as stored: they ask for identity.
            let target = try makeTemporaryDirectory().appendingPathComponent("g")
            _ = try await session.download(from: server.url("/gzip/1000"), to: .file(target))
            #expect(try Data(contentsOf: target) == TestContent.data(size: 1000))
            #expect(server.requests(to: "/gzip/1000").last?.headers["accept-encoding"] == "identity")
            // Off (the default): nothing is asked for, nothing decoded.
            let plain = try makeSession()
            let (raw, _) = try await plain.data(from: server.url("/gzip/1000"))
            #expect(raw == TestContent.data(size: 1000))
            #expect(server.requests(to: "/gzip/1000").last?.headers["accept-encoding"] == nil)
        }
    }
}
