import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("FerryTestServer (RFC 9110 ranges)")
struct TestServerTests {
    @Test(arguments: [
        ("bytes=0-99", ByteRangeRequest.partial(0..<100)),
        ("bytes=100-", .partial(100..<1000)),
        ("bytes=-10", .partial(990..<1000)),
        ("bytes=-5000", .partial(0..<1000)),
        ("bytes=990-5000", .partial(990..<1000)),
        ("bytes=1000-", .unsatisfiable),
        ("bytes=-0", .unsatisfiable),
        ("bytes=5-1", .full),
        ("bytes=0-1,5-6", .full),
        ("items=0-1", .full),
        ("bytes=a-b", .full),
    ])
    func rangeResolution(header: String, expected: ByteRangeRequest) {
        #expect(ByteRangeRequest(header: header, size: 1000) == expected)
    }

    func get(_ server: FerryTestServer, _ path: String, headers: [String: String]) async throws -> (Data, HTTPResponse)
    {
        var request = URLRequest(url: server.url(path))
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let session = try makeSession()
        return try await session.data(for: request)
    }

    @Test func partialContentAnd416() async throws {
        try await withServer { server in
            let (part, partial) = try await get(server, "/bytes/1000?seed=1", headers: ["Range": "bytes=10-19"])
            #expect(partial.statusCode == 206)
            #expect(partial.headers["Content-Range"] == "bytes 10-19/1000")
            #expect(part == TestContent.data(size: 1000, seed: 1, range: 10..<20))
            let (_, unsatisfiable) = try await get(server, "/bytes/1000", headers: ["Range": "bytes=1000-"])
            #expect(unsatisfiable.statusCode == 416)
            #expect(unsatisfiable.headers["Content-Range"] == "bytes */1000")
            let (short, shortHead) = try await get(server, "/bytes/1000?short206=5", headers: ["Range": "bytes=100-"])
            #expect(shortHead.statusCode == 206)
            #expect(shortHead.headers["Content-Range"] == "bytes 100-104/1000")
            #expect(short.count == 5)
            let (whole, ignored) = try await get(server, "/bytes/1000?ignore-range=1", headers: ["Range": "bytes=0-1"])
            #expect(ignored.statusCode == 200)
            #expect(whole.count == 1000)
        }
    }

    /// `url(_:)` used to force-unwrap, so a path with a space crashed the test process.
    @Test func urlPercentEncodesWhatAURLCannotHold() async throws {
        try await withServer { server in
            let base = "http://127.0.0.1:\(server.port)"
            #expect(server.url("/bytes/10?seed=1").absoluteString == base + "/bytes/10?seed=1")
            #expect(server.url("/a b/ü?q=x y").absoluteString == base + "/a%20b/%C3%BC?q=x%20y")
            #expect(server.url("/already%20escaped").absoluteString == base + "/already%20escaped")
            #expect(server.baseURL.absoluteString == base)
        }
    }

    @Test func ifRangeUsesStrongComparison() async throws {
        try await withServer { server in
            let (_, head) = try await get(server, "/bytes/1000", headers: [:])
            let etag = try #require(head.headers["ETag"])
            let (_, matching) = try await get(server, "/bytes/1000", headers: ["Range": "bytes=0-9", "If-Range": etag])
            #expect(matching.statusCode == 206)
            let (_, date) = try await get(
                server,
                "/bytes/1000",
                headers: ["Range": "bytes=0-9", "If-Range": "Wed, 21 Oct 2015 07:28:00 GMT"]
            )
            #expect(date.statusCode == 206)
            let (_, other) = try await get(
                server,
                "/bytes/1000?seed=2",
                headers: ["Range": "bytes=0-9", "If-Range": etag]
            )
            #expect(other.statusCode == 200)
            let (_, weak) = try await get(
                server,
                "/bytes/1000?etag=weak",
                headers: ["Range": "bytes=0-9", "If-Range": "W/" + etag]
            )
            #expect(weak.statusCode == 200)
        }
    }
}
