import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The error a task completed with (`nil` for success), waiting for its completion.
func completion(of task: SessionTask) async -> FerryError? {
    for await event in task.events {
        if case .completed(let error) = event { return error }
    }
    return task.error
}

@Suite("Streamed responses: bytes(for:)")
struct StreamedResponseTests {
    @Test func chunksArriveInOrderAndTheTaskCompletesAfterTheLast() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (bytes, response) = try await session.bytes(from: server.url("/bytes/3000000?seed=5"))
            #expect(response.statusCode == 200)
            #expect(response.expectedContentLength == 3_000_000)
            var body = Data()
            for try await chunk in bytes.chunks { body.append(chunk) }
            #expect(body == TestContent.data(size: 3_000_000, seed: 5))
            #expect(await completion(of: bytes.task) == nil)
            #expect(bytes.task.state == .completed)
            #expect(bytes.task.countOfBytesReceived == 3_000_000)
            #expect(bytes.task.receivedData == nil, "a streamed body is never collected")
        }
    }

    @Test func bytesOneAtATime() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (bytes, _) = try await session.bytes(from: server.url("/bytes/70000?seed=2&chunked=1"))
            var body = [UInt8]()
            for try await byte in bytes { body.append(byte) }
            #expect(Data(body) == TestContent.data(size: 70_000, seed: 2))
        }
    }

    @Test func anyStatusIsAResponseAndRedirectsAreFollowedFirst() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (notFound, head) = try await session.bytes(from: server.url("/status/404"))
            #expect(head.statusCode == 404)
            var lines: [String] = []
            for try await line in notFound.lines { lines.append(line) }
            #expect(lines == ["status 404"])

            let (redirected, final) = try await session.bytes(from: server.url("/redirect/2?to=/bytes/16"))
            #expect(final.statusCode == 200)
            #expect(final.url.path == "/bytes/16")
            var count = 0
            for try await chunk in redirected.chunks { count += chunk.count }
            #expect(count == 16)
        }
    }

    /// Back-pressure: a reader that stops after one chunk holds the transfer back, so the
    /// task has pulled only a few chunks more than were read (the whole 64 MiB would arrive
    /// in well under the pause on loopback without it); reading on takes the rest.
    @Test func aSlowReaderHoldsTheTransferBack() async throws {
        try await withServer { server in
            let session = try makeSession()
            let size = 64 << 20
            let (bytes, _) = try await session.bytes(from: server.url("/bytes/\(size)?seed=9"))
            var iterator = bytes.chunks.makeAsyncIterator()
            var read = try #require(try await iterator.next()).count
            try await Task.sleep(for: .milliseconds(500))
            let pulled = bytes.task.countOfBytesReceived
            #expect(pulled < 8 << 20, "the transfer pulled \(pulled) bytes while the reader held 1 chunk")
            #expect(bytes.task.state == .running)
            while let chunk = try await iterator.next() { read += chunk.count }
            #expect(read == size)
            #expect(await completion(of: bytes.task) == nil)
        }
    }

    @Test func aReaderThatStopsReadingCancelsTheTask() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (bytes, _) = try await session.bytes(from: server.url("/bytes/\(64 << 20)"))
            let task = bytes.task
            do {
                var iterator = bytes.chunks.makeAsyncIterator()
                _ = try await iterator.next()
            }
            // The iterator is gone: nobody will read the rest.
            let error = await completion(of: task)
            #expect(error?.reason == .cancelled)
            #expect(task.countOfBytesReceived < 64 << 20)
        }
    }

    @Test func cancellingTheReadersSwiftTaskCancelsTheTransfer() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (bytes, _) = try await session.bytes(from: server.url("/bytes/\(64 << 20)?drip=65536&interval=20"))
            let (firstChunk, gotOne) = AsyncStream.makeStream(of: Void.self)
            let reader = Task {
                var count = 0
                for try await chunk in bytes.chunks {
                    count += chunk.count
                    gotOne.yield()
                }
                return count
            }
            for await _ in firstChunk { break }
            reader.cancel()
            _ = try? await reader.value
            #expect(await completion(of: bytes.task)?.reason == .cancelled)
        }
    }

    @Test func theBodyCanBeReadOnce() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (bytes, _) = try await session.bytes(from: server.url("/bytes/1000"))
            var total = 0
            for try await chunk in bytes.chunks { total += chunk.count }
            #expect(total == 1000)
            await #expect {
                for try await _ in bytes.lines {}
            } throws: { error in
                (error as? FerryError)?.reason == .invalidRequest
            }
        }
    }

    @Test func failuresBeforeTheHeadAreThrownByBytesAndAfterItByTheIterator() async throws {
        let session = try makeSession()
        let closedPort = try await withServer { server in server.url("/bytes/10") }
        await #expect {
            _ = try await session.bytes(from: closedPort)
        } throws: { error in
            (error as? FerryError)?.reason == .network
        }
        try await withServer { server in
            let (bytes, head) = try await session.bytes(from: server.url("/bytes/1000000?close-after=100000"))
            #expect(head.statusCode == 200)
            var read = 0
            await #expect {
                for try await chunk in bytes.chunks { read += chunk.count }
            } throws: { error in
                let reason = (error as? FerryError)?.reason
                return reason == .network || reason == .badServerResponse
            }
            #expect(read <= 100_000)
            #expect(await completion(of: bytes.task) != nil)
        }
    }

    @Test func aSuspendedTaskStopsTheStreamUntilResumed() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (bytes, _) = try await session.bytes(from: server.url("/bytes/2000000?seed=4"))
            bytes.task.suspend()
            #expect(bytes.task.state == .suspended)
            let reader = Task {
                var body = Data()
                for try await chunk in bytes.chunks { body.append(chunk) }
                return body
            }
            bytes.task.resume()
            #expect(try await reader.value == TestContent.data(size: 2_000_000, seed: 4))
        }
    }
}

@Suite("Streamed responses against nginx", .serialized, .enabled(if: Nginx.enabled))
struct StreamedResponseNginxTests {
    @Test func linesOfAFileNginxServes() async throws {
        let root = try makeTemporaryDirectory("nginx-lines")
        defer { try? FileManager.default.removeItem(at: root) }
        var expected: [String] = []
        var text = ""
        for index in 0..<20_000 {
            let line = #"{"n":\#(index),"text":"line \#(index) é"}"#
            expected.append(line)
            text += line + (index % 3 == 0 ? "\r\n" : "\n")
        }
        expected.append("no newline at the end")
        text += "no newline at the end"
        try text.write(to: root.appendingPathComponent("events.jsonl"), atomically: true, encoding: .utf8)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }

        let session = try makeSession()
        let (bytes, response) = try await session.bytes(
            from: URL(string: "http://127.0.0.1:\(nginx.port)/events.jsonl")!
        )
        #expect(response.statusCode == 200)
        var lines: [String] = []
        for try await line in bytes.lines { lines.append(line) }
        #expect(lines == expected)
    }

    /// Issue 15's check: 1 GiB through `bytes(for:)` in a process of its own
    /// (`bench-ferry bytes`), byte-identical and under 64 MiB resident.
    @Test func oneGibibyteThroughBytesInBoundedMemory() async throws {
        let root = try makeTemporaryDirectory("nginx-bytes")
        defer { try? FileManager.default.removeItem(at: root) }
        let source = root.appendingPathComponent("big.bin")
        try await makeRandomFile(source, mebibytes: 1024)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }

        let result = try await ProcessRunner.run(
            ProcessRunner.productsDirectory.appendingPathComponent("bench-ferry").path,
            ["bytes", "http://127.0.0.1:\(nginx.port)/big.bin"]
        )
        #expect(result.status == 0, "\(result.stderrText)")
        let report = result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(report == "\(1 << 30) \(try await sha256(of: source))")
        #expect(result.maxResidentKiB > 1024, "the peak RSS was not measured")
        #expect(result.maxResidentKiB < 64 * 1024, "peak RSS \(result.maxResidentKiB) KiB")
        print("bytes(for:) 1 GiB from nginx: peak RSS \(result.maxResidentKiB / 1024) MiB")
    }
}
