import FerryLazyLibcurl
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// FerryLazyLibcurl defines the libcurl functions Foundation's URLSession calls and forwards them
/// to libcurl loaded on first use; `ferry` links it so that it never loads libcurl at all. These
/// tests link it too and run URLSession through it against servers nobody here wrote, so every
/// forwarded function (and the variadic option setters, with pointers, longs and 64-bit sizes)
/// is exercised by real transfers.
@Suite("libcurl loaded on first use")
struct LazyLibcurlTests {
    #if os(Linux) && (arch(x86_64) || arch(arm64))
    @Test(.enabled(if: Nginx.enabled))
    func urlSessionGetsARangeFromNginxThroughTheForwardedFunctions() async throws {
        let root = try makeTemporaryDirectory("lazy-libcurl")
        let bytes = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try bytes.write(to: root.appendingPathComponent("file.bin"))
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }

        var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(nginx.port)/file.bin")))
        request.setValue("bytes=1000-50999", forHTTPHeaderField: "Range")
        request.timeoutInterval = 30
        let (body, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 206)
        #expect(body == bytes[1000..<51000])
        #expect(ferry_lazy_libcurl_is_loaded() == 1)
    }

    @Test(.enabled(if: Httpbin.enabled))
    func urlSessionPostsABodyToHttpbinThroughTheForwardedFunctions() async throws {
        let httpbin = try await Httpbin()
        defer { httpbin.stop() }
        var request = URLRequest(url: try #require(URL(string: "http://127.0.0.1:\(httpbin.port)/post")))
        request.httpMethod = "POST"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        let payload = Data(repeating: 0x61, count: 70_000)
        let (body, response) = try await URLSession.shared.upload(for: request, from: payload)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let echo = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect((echo["data"] as? String)?.count == payload.count)
        #expect(ferry_lazy_libcurl_is_loaded() == 1)
    }
    #endif
}
