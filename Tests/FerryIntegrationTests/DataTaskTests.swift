import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Data tasks")
struct DataTaskTests {
    @Test func getReturnsTheExactBody() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (data, response) = try await session.data(from: server.url("/bytes/300000?seed=3"))
            #expect(response.statusCode == 200)
            #expect(data == TestContent.data(size: 300_000, seed: 3))
            #expect(response.headers["ETag"] != nil)
            session.finishTasksAndInvalidate()
        }
    }

    @Test func statusErrorsAreResponsesForDataTasks() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (data, response) = try await session.data(from: server.url("/status/404"))
            #expect(response.statusCode == 404)
            #expect(String(decoding: data, as: UTF8.self) == "status 404\n")
            await #expect {
                try await session.value(for: URLRequest(url: server.url("/status/500")), as: .string)
            } throws: { error in
                (error as? FerryError)?.reason == .unacceptableStatusCode(500)
            }
        }
    }

    @Test func defaultHeadersBasicAuthAndEcho() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.httpAdditionalHeaders = ["X-Default": "1", "User-Agent": "ferry-tests"]
            }
            var request = URLRequest(url: server.url("/basic-auth/ada/lovelace"))
            request.setBasicAuthorization(username: "ada", password: "lovelace")
            let (_, ok) = try await session.data(for: request)
            #expect(ok.statusCode == 200)
            let (_, denied) = try await session.data(from: server.url("/basic-auth/ada/lovelace"))
            #expect(denied.statusCode == 401)

            struct Echo: Decodable, Sendable {
                var method: String
                var headers: [[String]]
                var body: String
            }
            var post = URLRequest(url: server.url("/echo"), method: .post)
            post.setValue("mine", forHTTPHeaderField: "User-Agent")
            post = try JSONParameterEncoder.default.encode(["k": "v"], into: post)
            let echo = try await session.value(for: post, as: .decodable(Echo.self))
            #expect(echo.method == "POST")
            #expect(echo.body == #"{"k":"v"}"#)
            let headers = Dictionary(echo.headers.map { ($0[0].lowercased(), $0[1]) }, uniquingKeysWith: { a, _ in a })
            #expect(headers["x-default"] == "1")
            #expect(headers["user-agent"] == "mine")
            #expect(headers["content-type"] == "application/json")
        }
    }

    @Test func bodyLargerThanTheLimitFails() async throws {
        try await withServer { server in
            let session = try makeSession { $0.maximumInMemoryBodySize = 100_000 }
            await #expect {
                try await session.data(from: server.url("/bytes/100001"))
            } throws: { error in
                (error as? FerryError)?.reason == .bodyTooLarge(limit: 100_000)
            }
            // Without Content-Length the limit is enforced while reading.
            await #expect {
                try await session.data(from: server.url("/bytes/100001?chunked=1"))
            } throws: { error in
                (error as? FerryError)?.reason == .bodyTooLarge(limit: 100_000)
            }
            let (data, response) = try await session.data(from: server.url("/bytes/100000?chunked=1"))
            #expect(data == TestContent.data(size: 100_000))
            #expect(response.expectedContentLength == nil)
        }
    }

    @Test func completionHandlerRunsExactlyOnce() async throws {
        try await withServer { server in
            let session = try makeSession()
            let calls = CallCounter()
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let task = session.dataTask(with: URLRequest(url: server.url("/bytes/1000"))) { data, response, error in
                    calls.record(data?.count ?? -1, response?.statusCode ?? -1, error)
                    continuation.resume()
                }
                task.resume()
            }
            try await Task.sleep(for: .milliseconds(100))
            #expect(calls.values == [[1000, 200]])
        }
    }

    @Test func invalidURLsAreTypedErrors() async throws {
        let session = try makeSession()
        for url in ["ftp://example.com/x", "http:///nohost", "file:///etc/passwd"] {
            await #expect {
                try await session.data(from: URL(string: url)!)
            } throws: { error in
                (error as? FerryError)?.reason == .invalidURL
            }
        }
        // Foundation drops values with CR / LF itself; a name that is not a token reaches
        // Ferry, which refuses to send it.
        var injected = URLRequest(url: URL(string: "http://127.0.0.1:1/")!)
        injected.setValue("x", forHTTPHeaderField: "Bad Name")
        await #expect {
            try await session.data(for: injected)
        } throws: { error in
            (error as? FerryError)?.reason == .invalidRequest
        }
    }

    @Test func connectionRefusedIsANetworkError() async throws {
        let session = try makeSession()
        await #expect {
            try await session.data(from: URL(string: "http://127.0.0.1:1/")!)
        } throws: { error in
            (error as? FerryError)?.reason == .network
        }
    }
}

/// Counts callback invocations from any thread.
final class CallCounter: Sendable {
    private let calls = MutexBox<[[Int]]>([])
    func record(_ count: Int, _ status: Int, _ error: FerryError?) { calls.mutate { $0.append([count, status]) } }
    var values: [[Int]] { calls.value }
}
