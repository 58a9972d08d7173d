import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Changes or refuses what the cache stores.
final class CacheDelegate: SessionDelegate {
    let refuse: Bool
    init(refuse: Bool) { self.refuse = refuse }

    func session(
        _ session: Session,
        dataTask: DataTask,
        willCacheResponse proposedResponse: CachedResponse
    ) async -> CachedResponse? {
        refuse ? nil : proposedResponse
    }
}

@Suite("HTTP cache")
struct CacheTests {
    func text(_ session: Session, _ request: URLRequest) async throws -> (String, Int) {
        let (data, response) = try await session.data(for: request)
        return (String(decoding: data, as: UTF8.self), response.statusCode)
    }

    @Test func freshThenRevalidatedWithA304() async throws {
        try await withServer { server in
            let session = try makeSession { $0.responseCache = ResponseCache() }
            let fresh = URLRequest(url: server.url("/cached/a?cc=max-age%3D60"))
            #expect(try await text(session, fresh) == ("a v0", 200))
            #expect(try await text(session, fresh) == ("a v0", 200))
            #expect(server.requests(to: "/cached/a").count == 1)  // served fresh from the cache

            let stale = URLRequest(url: server.url("/cached/b?cc=max-age%3D0"))
            #expect(try await text(session, stale) == ("b v0", 200))
            #expect(try await text(session, stale) == ("b v0", 200))  // a 304 answered, body from the cache
            let sent = server.requests(to: "/cached/b")
            #expect(sent.count == 2)
            #expect(sent.last?.headers["if-none-match"] == "\"v0\"")
            // The resource changes: the next revalidation brings the new body, and stores it.
            server.setVersion("b", size: 0, seed: 1)
            #expect(try await text(session, stale) == ("b v1", 200))
            #expect(try await text(session, stale) == ("b v1", 200))
            #expect(server.requests(to: "/cached/b").last?.headers["if-none-match"] == "\"v1\"")
        }
    }

    @Test func noStoreNoCacheVaryAndPolicies() async throws {
        try await withServer { server in
            let session = try makeSession { $0.responseCache = ResponseCache() }
            let noStore = URLRequest(url: server.url("/cached/c?cc=no-store"))
            _ = try await text(session, noStore)
            _ = try await text(session, noStore)
            #expect(server.requests(to: "/cached/c").allSatisfy { $0.headers["if-none-match"] == nil })
            #expect(server.requests(to: "/cached/c").count == 2)

            let noCache = URLRequest(url: server.url("/cached/d?cc=no-cache"))
            _ = try await text(session, noCache)
            _ = try await text(session, noCache)
            #expect(server.requests(to: "/cached/d").last?.headers["if-none-match"] == "\"v0\"")

            var english = URLRequest(url: server.url("/cached/e?vary=Accept-Language"))
            english.setValue("en", forHTTPHeaderField: "Accept-Language")
            var french = english
            french.setValue("fr", forHTTPHeaderField: "Accept-Language")
            #expect(try await text(session, english).0 == "e v0 for en")
            #expect(try await text(session, french).0 == "e v0 for fr")
            #expect(try await text(session, english).0 == "e v0 for en")
            #expect(server.requests(to: "/cached/e").count == 2)

            var reload = URLRequest(url: server.url("/cached/a"))
            reload.cachePolicy = .reloadIgnoringLocalCacheData
            _ = try await text(session, reload)
            _ = try await text(session, reload)
            #expect(server.requests(to: "/cached/a").count == 2)

            var offline = URLRequest(url: server.url("/cached/never"))
            offline.cachePolicy = .returnCacheDataDontLoad
            await #expect(throws: FerryError.self) { try await session.data(for: offline) }
            #expect(server.requests(to: "/cached/never").isEmpty)
            var staleOK = URLRequest(url: server.url("/cached/b?cc=max-age%3D0"))
            _ = try await text(session, staleOK)
            staleOK.cachePolicy = .returnCacheDataElseLoad
            _ = try await text(session, staleOK)
            #expect(server.requests(to: "/cached/b").count == 1)
            // Authorization without explicit permission: never stored.
            var authorized = URLRequest(url: server.url("/cached/f"))
            authorized.setValue("Bearer x", forHTTPHeaderField: "Authorization")
            _ = try await text(session, authorized)
            _ = try await text(session, authorized)
            #expect(server.requests(to: "/cached/f").count == 2)
        }
    }

    @Test func willCacheResponseCanRefuseAndDiskEntriesSurvive() async throws {
        try await withServer { server in
            let refusing = try makeSession(delegate: CacheDelegate(refuse: true)) { $0.responseCache = ResponseCache() }
            let url = URLRequest(url: server.url("/cached/g"))
            _ = try await text(refusing, url)
            _ = try await text(refusing, url)
            #expect(server.requests(to: "/cached/g").count == 2)

            let directory = try makeTemporaryDirectory("http-cache")
            let first = try makeSession { $0.responseCache = ResponseCache(directory: directory) }
            _ = try await text(first, URLRequest(url: server.url("/cached/h")))
            let second = try makeSession { $0.responseCache = ResponseCache(directory: directory) }
            #expect(try await text(second, URLRequest(url: server.url("/cached/h"))) == ("h v0", 200))
            #expect(server.requests(to: "/cached/h").count == 1)
        }
    }
}
