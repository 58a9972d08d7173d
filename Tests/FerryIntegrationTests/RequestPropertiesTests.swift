import Ferry
import FerryTestServer
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Chunks of `data`, 100,000 bytes each, as an async sequence: a body provider's stream.
private func chunks(of data: Data) -> AsyncStream<Data> {
    AsyncStream { continuation in
        var offset = 0
        while offset < data.count {
            let end = min(offset + 100_000, data.count)
            continuation.yield(data[offset..<end])
            offset = end
        }
        continuation.finish()
    }
}

@Suite("Request properties: timeoutInterval, httpBodyStream, body providers")
struct RequestPropertiesTests {
    func report(_ data: Data) throws -> SinkReport { try JSONDecoder().decode(SinkReport.self, from: data) }

    @Test func aRequestsTimeoutIntervalOverridesTheSessions() async throws {
        try await withServer { server in
            // The session would wait a minute; this request waits half a second.
            let patient = try makeSession { $0.timeoutIntervalForRequest = 60 }
            var short = URLRequest(url: server.url("/bytes/10?delay=4000"))
            short.timeoutInterval = 0.5
            await #expect {
                _ = try await patient.data(for: short)
            } throws: { error in
                let error = error as? FerryError
                return error?.reason == .timedOut(.idle) && error?.message.contains("request's timeoutInterval") == true
            }
            // The session gives up after half a second; this request may wait 30.
            let hasty = try makeSession { $0.timeoutIntervalForRequest = 0.5 }
            var long = URLRequest(url: server.url("/bytes/10?delay=1500"))
            long.timeoutInterval = 30
            let (data, response) = try await hasty.data(for: long)
            #expect(response.statusCode == 200)
            #expect(data.count == 10)
            // A request that keeps Foundation's default follows the session.
            await #expect {
                _ = try await hasty.data(for: URLRequest(url: server.url("/bytes/10?delay=4000")))
            } throws: { error in
                (error as? FerryError)?.reason == .timedOut(.idle)
            }
        }
    }

    @Test func httpBodyStreamIsSentWithItsContentLengthOrChunked() async throws {
        try await withServer { server in
            let session = try makeSession()
            let body = TestContent.data(size: 1_000_003, seed: 6)
            var request = URLRequest(url: server.url("/sink"), method: .put)
            request.httpBodyStream = InputStream(data: body)
            request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length")
            let sized = try report(try await session.data(for: request).0)
            #expect(sized.bytes == 1_000_003)
            #expect(sized.sha256 == TestContent.sha256(size: 1_000_003, seed: 6))
            #expect(!sized.chunked)
            #expect(sized.contentLength == 1_000_003)

            var unsized = URLRequest(url: server.url("/sink"), method: .post)
            unsized.httpBodyStream = InputStream(data: body)
            let chunked = try report(try await session.data(for: unsized).0)
            #expect(chunked.chunked)
            #expect(chunked.sha256 == TestContent.sha256(size: 1_000_003, seed: 6))

            var wrong = URLRequest(url: server.url("/sink"), method: .post)
            wrong.httpBodyStream = InputStream(data: body)
            wrong.setValue("many", forHTTPHeaderField: "Content-Length")
            await #expect {
                _ = try await session.data(for: wrong)
            } throws: { error in
                (error as? FerryError)?.reason == .invalidRequest
            }
        }
    }

    @Test func aStreamCannotFollowA307ButAProvidedBodyIsSentAgain() async throws {
        try await withServer { server in
            let session = try makeSession()
            let body = TestContent.data(size: 300_000, seed: 8)
            let target = server.url("/redirect-to?url=/sink&status=307")
            var streamed = URLRequest(url: target, method: .post)
            streamed.httpBodyStream = InputStream(data: body)
            streamed.setValue("\(body.count)", forHTTPHeaderField: "Content-Length")
            await #expect {
                _ = try await session.data(for: streamed)
            } throws: { error in
                (error as? FerryError)?.reason == .bodyNotReplayable
            }

            let calls = Mutex(0)
            let (data, response) = try await session.upload(
                for: URLRequest(url: target, method: .post),
                length: Int64(body.count)
            ) {
                calls.withLock { $0 += 1 }
                return chunks(of: body)
            }
            #expect(response.statusCode == 200)
            let sink = try report(data)
            #expect(sink.method == "POST")
            #expect(sink.sha256 == TestContent.sha256(size: 300_000, seed: 8))
            #expect(!sink.chunked)
            #expect(calls.withLock { $0 } == 2, "once for the first hop, once for the 307's target")
        }
    }

    @Test func aProvidedBodyIsSentAgainAfterAChallenge() async throws {
        try await withServer { server in
            let session = try makeSession { $0.credential = Credential(user: "ada", password: "lovelace") }
            let calls = Mutex(0)
            let body = Data("sent twice".utf8)
            let (_, response) = try await session.upload(
                for: URLRequest(url: server.url("/basic-auth/ada/lovelace"), method: .post),
                length: nil
            ) {
                calls.withLock { $0 += 1 }
                return chunks(of: body)
            }
            #expect(response.statusCode == 200)
            #expect(calls.withLock { $0 } == 2)
        }
    }

    @Test func aFailingProviderFailsTheUpload() async throws {
        try await withServer { server in
            struct Broken: Error {}
            let session = try makeSession()
            await #expect {
                _ = try await session.upload(for: URLRequest(url: server.url("/sink"), method: .post), length: 10) {
                    () async throws -> AsyncStream<Data> in throw Broken()
                }
            } throws: { error in
                (error as? FerryError)?.reason == .uploadBodyFailed && (error as? FerryError)?.underlying is Broken
            }
        }
    }
}

@Suite("Request properties against httpbin", .serialized, .enabled(if: Httpbin.enabled))
struct RequestPropertiesHttpbinTests {
    struct Echo: Decodable {
        var data: String
        var method: String
        var headers: [String: String]
    }

    @Test func httpBodyStreamAndAProvidedBodyThroughA307() async throws {
        try await withHttpbin { httpbin in
            let session = try makeSession()
            var request = URLRequest(url: URL(string: httpbin.url("/anything"))!, method: .put)
            request.httpBodyStream = InputStream(data: Data("from a stream".utf8))
            request.setValue("13", forHTTPHeaderField: "Content-Length")
            let (data, response) = try await session.data(for: request)
            #expect(response.statusCode == 200)
            let echo = try JSONDecoder().decode(Echo.self, from: data)
            #expect(echo.data == "from a stream")
            #expect(echo.method == "PUT")
            #expect(echo.headers["Content-Length"] == "13")

            let calls = Mutex(0)
            let redirect = URL(string: httpbin.url("/redirect-to?url=/anything&status_code=307"))!
            let (again, final) = try await session.upload(for: URLRequest(url: redirect, method: .post), length: 8) {
                calls.withLock { $0 += 1 }
                return chunks(of: Data("provided".utf8))
            }
            #expect(final.statusCode == 200)
            #expect(try JSONDecoder().decode(Echo.self, from: again).data == "provided")
            // gunicorn may answer the 307 before the first body was asked for (the provider
            // is called only when a body is sent): once or twice, never a half body.
            #expect((1...2).contains(calls.withLock { $0 }))
        }
    }
}
