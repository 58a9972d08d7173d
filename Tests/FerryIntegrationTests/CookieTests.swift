import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Cookies")
struct CookieTests {
    struct Echo: Decodable { var cookie: String }

    func echo(_ session: Session, _ url: URL) async throws -> String {
        try JSONDecoder().decode(Echo.self, from: try await session.data(from: url).0).cookie
    }

    func set(_ field: String, _ server: FerryTestServer, path: String = "/cookies/set") -> URL {
        var components = URLComponents(url: server.url(path), resolvingAgainstBaseURL: false)
        components?.queryItems = [URLQueryItem(name: "h", value: field)]
        return components?.url ?? server.url(path)
    }

    @Test func setScopedAndSentBack() async throws {
        try await withServer { server in
            let session = try makeSession { $0.cookieStore = CookieStore() }
            _ = try await session.data(from: set("id=1; Path=/cookies; HttpOnly", server))
            _ = try await session.data(from: set("theme=dark", server))  // default path: /cookies
            _ = try await session.data(from: set("elsewhere=x; Path=/other", server))
            _ = try await session.data(from: set("tls=only; Secure", server))  // refused over http
            _ = try await session.data(from: set("bad; Path=/", server))  // no "=": ignored
            _ = try await session.data(from: set("far=away; Domain=example.org", server))  // not ours
            #expect(try await echo(session, server.url("/cookies")) == "id=1; theme=dark")
            // The longer path first.
            _ = try await session.data(from: set("deep=1; Path=/cookies/set", server))
            #expect(try await echo(session, server.url("/cookies/set")) == "deep=1; id=1; theme=dark")
            // Replaced by name, domain and path; removed by Max-Age=0.
            _ = try await session.data(from: set("theme=light", server))
            _ = try await session.data(from: set("id=gone; Path=/cookies; Max-Age=0", server))
            #expect(try await echo(session, server.url("/cookies")) == "theme=light")
            // A request's own Cookie header is left alone.
            var own = URLRequest(url: server.url("/cookies"))
            own.setValue("mine=1", forHTTPHeaderField: "Cookie")
            let (data, _) = try await session.data(for: own)
            #expect(try JSONDecoder().decode(Echo.self, from: data).cookie == "mine=1")
            // A session without a store sends none.
            let none = try makeSession { $0.cookieStore = nil }
            #expect(try await echo(none, server.url("/cookies")) == "")
        }
    }

    @Test func aRedirectSetsACookieTheNextHopSends() async throws {
        try await withServer { server in
            let session = try makeSession { $0.cookieStore = CookieStore() }
            var components = URLComponents(url: server.url("/cookies/redirect"), resolvingAgainstBaseURL: false)
            components?.queryItems = [
                URLQueryItem(name: "h", value: "hop=1; Path=/"), URLQueryItem(name: "to", value: "/cookies"),
            ]
            let url = try #require(components?.url)
            #expect(try await echo(session, url) == "hop=1")
        }
    }

    @Test func persistentCookiesSurviveTheStoreButSessionCookiesDoNot() async throws {
        try await withServer { server in
            let file = try makeTemporaryDirectory("cookies").appendingPathComponent("cookies.json")
            let store = try CookieStore(persistingTo: file)
            let session = try makeSession { $0.cookieStore = store }
            _ = try await session.data(from: set("keep=1; Max-Age=3600; Path=/", server))
            _ = try await session.data(from: set("session=1; Path=/", server))
            let reloaded = try CookieStore(persistingTo: file)
            #expect(reloaded.allCookies.map(\.name) == ["keep"])
            let again = try makeSession { $0.cookieStore = reloaded }
            #expect(try await echo(again, server.url("/cookies")) == "keep=1")
            let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }

    @Test func ferryReadsAndWritesCookieFiles() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cookie-cli")
            let jar = scratch.appendingPathComponent("cookies.txt")
            // A file that is not a cookie file is not overwritten.
            let notAStore = scratch.appendingPathComponent("notes.txt")
            try Data("my notes".utf8).write(to: notAStore)
            let refused = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", server.url("/cookies").absoluteString, "--cookie-jar", notAStore.path]
            )
            #expect(refused.status == 23)
            #expect(try Data(contentsOf: notAStore) == Data("my notes".utf8))
            // --cookie-jar: what the server set, with an expiry, lands in the jar.
            let first = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", set("token=abc; Max-Age=600; Path=/", server).absoluteString, "--cookie-jar", jar.path]
            )
            #expect(first.status == 0, "\(first.stderrText)")
            let written = try String(contentsOf: jar, encoding: .utf8)
            #expect(try NetscapeCookieFile.cookies(in: written).map(\.name) == ["token"])
            // -b: sent back from the file.
            let second = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", server.url("/cookies").absoluteString, "-b", jar.path]
            )
            #expect(String(decoding: second.stdout, as: UTF8.self).contains("token=abc"))
            // -b and --cookie-jar together: the jar gets -b's cookies and the new ones.
            let other = scratch.appendingPathComponent("other.txt")
            let third = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "-q", set("more=1; Max-Age=600; Path=/", server).absoluteString, "-b", jar.path,
                    "--cookie-jar", other.path,
                ]
            )
            #expect(third.status == 0)
            let both = try String(contentsOf: other, encoding: .utf8)
            #expect(try NetscapeCookieFile.cookies(in: both).map(\.name).sorted() == ["more", "token"])
        }
    }

    @Test func ephemeralSessionsShareNothing() async throws {
        try await withServer { server in
            let one = try Session(configuration: .ephemeral)
            let two = try Session(configuration: .ephemeral)
            _ = try await one.data(from: set("who=one; Path=/", server))
            #expect(try await echo(one, server.url("/cookies")) == "who=one")
            #expect(try await echo(two, server.url("/cookies")) == "")
        }
    }
}
