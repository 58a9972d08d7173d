import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The completion-handler forms URLSession has and AFNetworking users call: upload from
/// `Data`, download to a temporary location, download from resume data.
@Suite("Completion handlers")
struct CompletionHandlerTests {
    /// What a handler saw, sent out of it.
    struct Seen: Sendable {
        var file: URL?
        var contents: Data?
        var body: Data?
        var status: Int?
        var error: FerryError?
    }

    @Test func anUploadFromDataGetsTheResponseBody() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (seen, continuation) = AsyncStream.makeStream(of: Seen.self)
            var request = URLRequest(url: server.url("/echo"), method: .post)
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
            session.uploadTask(with: request, from: Data("hello ferry".utf8)) { body, response, error in
                continuation.yield(Seen(body: body, status: response?.statusCode, error: error))
            }.resume()
            let result = try #require(await first(seen))
            #expect(result.error == nil && result.status == 200)
            let echo = try JSONSerialization.jsonObject(with: result.body ?? Data()) as? [String: Any]
            #expect(echo?["body"] as? String == "hello ferry")
            #expect(echo?["method"] as? String == "POST")
        }
    }

    /// The file exists while the handler runs and is gone once it returned, as with
    /// URLSession's temporary location.
    @Test func aDownloadToATemporaryLocationLastsAsLongAsTheHandler() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (seen, continuation) = AsyncStream.makeStream(of: Seen.self)
            session.downloadTask(with: server.url("/bytes/200000?seed=4")) { file, response, error in
                let contents = file.flatMap { try? Data(contentsOf: $0) }
                continuation.yield(Seen(file: file, contents: contents, status: response?.statusCode, error: error))
            }.resume()
            let result = try #require(await first(seen))
            #expect(result.error == nil && result.status == 200)
            #expect(result.contents == TestContent.data(size: 200_000, seed: 4))
            let file = try #require(result.file)
            try await waitUntilGone(file)
        }
    }

    @Test func aDownloadFromResumeDataContinuesAndHandsOverTheFile() async throws {
        try await withServer { server in
            let session = try makeSession()
            let task = session.downloadTask(
                with: server.url("/bytes/300000?seed=5&stall-at=60000"),
                to: .file(try makeTemporaryDirectory().appendingPathComponent("p.bin"))
            )
            let events = task.events
            task.resume()
            for await event in events { if case .wroteData = event { break } }
            let resumeData = try #require(await task.cancelProducingResumeData())
            let (seen, continuation) = AsyncStream.makeStream(of: Seen.self)
            session.downloadTask(withResumeData: resumeData) { file, response, error in
                let contents = file.flatMap { try? Data(contentsOf: $0) }
                continuation.yield(Seen(file: file, contents: contents, status: response?.statusCode, error: error))
            }.resume()
            let result = try #require(await first(seen))
            #expect(result.error == nil)
            #expect(result.status == 206)
            #expect(result.contents == TestContent.data(size: 300_000, seed: 5))
            #expect(server.requests.last?.headers["range"] == "bytes=\(resumeData.bytesOnDisk)-")
            try await waitUntilGone(try #require(result.file))
        }
    }

    private func first(_ stream: AsyncStream<Seen>) async -> Seen? {
        for await value in stream { return value }
        return nil
    }

    /// The file is removed right after the handler returns, on the delivery context: waited
    /// for by state, with a bound that only turns a hang into a failure.
    private func waitUntilGone(_ file: URL) async throws {
        for _ in 0..<1000 where FileManager.default.fileExists(atPath: file.path) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(!FileManager.default.fileExists(atPath: file.path), "the temporary file stayed")
    }
}
