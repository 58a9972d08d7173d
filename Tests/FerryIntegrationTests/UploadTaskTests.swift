import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Upload tasks")
struct UploadTaskTests {
    func report(_ data: Data) throws -> SinkReport { try JSONDecoder().decode(SinkReport.self, from: data) }

    @Test func uploadFromDataReportsExactProgress() async throws {
        try await withServer { server in
            let session = try makeSession()
            let body = TestContent.data(size: 3_000_000, seed: 1)
            let task = session.uploadTask(with: URLRequest(url: server.url("/sink"), method: .post), from: body)
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(task.error == nil)
            let sink = try report(try #require(task.receivedData))
            #expect(sink.bytes == 3_000_000)
            #expect(sink.sha256 == TestContent.sha256(size: 3_000_000, seed: 1))
            #expect(!sink.chunked)
            expectExactProgress(
                seen.compactMap { if case .sentBodyData(let a, let b, let c) = $0 { (a, b, c) } else { nil } },
                endsAt: 3_000_000
            )
            #expect(task.uploadProgress == TransferProgress(completedBytes: 3_000_000, totalBytes: 3_000_000))
        }
    }

    @Test func uploadFromFileStreamsFromDisk() async throws {
        try await withServer { server in
            let session = try makeSession()
            let file = try makeTemporaryDirectory().appendingPathComponent("upload.bin")
            try TestContent.data(size: 2_500_001, seed: 4).write(to: file)
            let (data, response) = try await session.upload(
                for: URLRequest(url: server.url("/sink"), method: .put),
                fromFile: file
            )
            #expect(response.statusCode == 200)
            let sink = try report(data)
            #expect(sink.method == "PUT")
            #expect(sink.bytes == 2_500_001)
            #expect(sink.sha256 == TestContent.sha256(size: 2_500_001, seed: 4))
        }
    }

    @Test func missingFileIsATypedError() async throws {
        try await withServer { server in
            let session = try makeSession()
            await #expect {
                try await session.upload(
                    for: URLRequest(url: server.url("/sink"), method: .put),
                    fromFile: URL(fileURLWithPath: "/nonexistent/ferry")
                )
            } throws: { error in
                (error as? FerryError)?.reason == .uploadBodyFailed
            }
        }
    }

    @Test(arguments: [true, false])
    func uploadFromStream(knownLength: Bool) async throws {
        try await withServer { server in
            let session = try makeSession()
            let total = 1_000_000
            let stream = AsyncStream<Data> { continuation in
                var offset: Int64 = 0
                while offset < Int64(total) {
                    let end = min(Int64(total), offset + 65_537)
                    continuation.yield(TestContent.data(size: Int64(total), seed: 2, range: offset..<end))
                    offset = end
                }
                continuation.finish()
            }
            let task = session.uploadTask(
                with: URLRequest(url: server.url("/sink"), method: .post),
                fromStream: stream,
                length: knownLength ? Int64(total) : nil
            )
            #expect(task.countOfBytesExpectedToSend == (knownLength ? Int64(total) : nil))
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            #expect(task.error == nil)
            let sink = try report(try #require(task.receivedData))
            #expect(sink.bytes == Int64(total))
            #expect(sink.sha256 == TestContent.sha256(size: Int64(total), seed: 2))
            #expect(sink.chunked == !knownLength)
            #expect(task.uploadProgress.completedBytes == Int64(total))
            #expect((task.uploadProgress.fractionCompleted == nil) == !knownLength)
        }
    }

    @Test func streamShorterThanDeclaredFails() async throws {
        try await withServer { server in
            let session = try makeSession()
            let stream = AsyncStream<Data> { continuation in
                continuation.yield(Data(repeating: 1, count: 10))
                continuation.finish()
            }
            await #expect(throws: FerryError.self) {
                try await session.upload(
                    for: URLRequest(url: server.url("/sink"), method: .post),
                    fromStream: stream,
                    length: 20
                )
            }
        }
    }
}
