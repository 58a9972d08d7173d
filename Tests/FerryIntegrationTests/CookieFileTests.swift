import Ferry
import Foundation
import Testing

/// httpbin's `/cookies` reply.
private struct CookieEcho: Decodable {
    var cookies: [String: String]
}

/// An nginx that sets a session cookie at `/login` and echoes the `Cookie` field at `/echo`.
private func cookieNginx(_ root: URL) async throws -> Nginx {
    try await Nginx(
        serving: root,
        server: """
            location = /login { add_header Set-Cookie "session=n1; Path=/; HttpOnly"; return 200 "in"; }
            location = /echo { default_type text/plain; return 200 "cookie=$http_cookie"; }
            """
    )
}

/// curl's cookie files, with servers nobody here wrote: httpbin (gunicorn) and nginx, and
/// curl itself reading Ferry's jar and writing the file Ferry reads.
@Suite("curl's cookie files", .serialized)
struct CookieFileTests {
    let ferry = ProcessRunner.ferry
    let curl = "/usr/bin/curl"

    /// `ferry get login --cookie-jar j; ferry get file -b j` keeps a session cookie (no
    /// expiry), as curl's `-c` / `-b` do; the jar is Netscape format, mode 0600, and curl
    /// sends its cookies too.
    @Test(.enabled(if: Httpbin.enabled))
    func aSessionCookieSurvivesTheJarWithHttpbin() async throws {
        try await withHttpbin { httpbin in
            let scratch = try makeTemporaryDirectory("jar")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let jar = scratch.appendingPathComponent("cookies.txt")
            let login = try await ProcessRunner.run(
                ferry,
                ["get", "-q", httpbin.url("/cookies/set?session=abc"), "--cookie-jar", jar.path]
            )
            #expect(login.status == 0, "\(login.stderrText)")
            let text = try String(contentsOf: jar, encoding: .utf8)
            #expect(text.hasPrefix("# Netscape HTTP Cookie File"))
            #expect(text.contains("127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc"))
            let mode = try FileManager.default.attributesOfItem(atPath: jar.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            for client in [(ferry, ["get", "-q"]), (curl, ["-s"])] {
                let next = try await ProcessRunner.run(client.0, client.1 + ["-b", jar.path, httpbin.url("/cookies")])
                #expect(try JSONDecoder().decode(CookieEcho.self, from: next.stdout).cookies == ["session": "abc"])
            }
        }
    }

    /// A jar curl wrote (`curl -c`), `#HttpOnly_` lines and its header comment included, is
    /// read by `ferry -b`, against nginx.
    @Test(.enabled(if: Nginx.enabled))
    func ferryReadsCurlsJarWithNginx() async throws {
        let root = try makeTemporaryDirectory("cookie-nginx")
        defer { try? FileManager.default.removeItem(at: root) }
        let nginx = try await cookieNginx(root)
        defer { nginx.stop() }
        let jar = root.appendingPathComponent("curl-jar.txt")
        let made = try await ProcessRunner.run(curl, ["-s", "-c", jar.path, "http://127.0.0.1:\(nginx.port)/login"])
        #expect(made.status == 0)
        #expect(try String(contentsOf: jar, encoding: .utf8).contains("#HttpOnly_127.0.0.1"))
        let echo = "http://127.0.0.1:\(nginx.port)/echo"
        let ours = try await ProcessRunner.run(ferry, ["get", "-q", "-b", jar.path, echo])
        let theirs = try await ProcessRunner.run(curl, ["-s", "-b", jar.path, echo])
        #expect(ours.stdoutText == "cookie=session=n1")
        #expect(ours.stdoutText == theirs.stdoutText)
        // And Ferry's jar of the same login, read back by curl.
        let ferryJar = root.appendingPathComponent("ferry-jar.txt")
        let login = try await ProcessRunner.run(
            ferry,
            ["get", "-q", "http://127.0.0.1:\(nginx.port)/login", "--cookie-jar", ferryJar.path]
        )
        #expect(login.status == 0)
        #expect(
            try String(contentsOf: ferryJar, encoding: .utf8).contains(
                "#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tn1"
            )
        )
        let back = try await ProcessRunner.run(curl, ["-s", "-b", ferryJar.path, echo])
        #expect(back.stdoutText == "cookie=session=n1")
    }

    /// `-b 'a=b; c=d'` sends inline cookies, as curl does; they go to the URL's host only,
    /// never to a host a redirect leads to.
    @Test(.enabled(if: Httpbin.enabled))
    func inlineCookiesAreSentLikeCurlsAndStayWithTheirHost() async throws {
        try await withHttpbin { httpbin in
            for client in [(ferry, ["get", "-q"]), (curl, ["-s"])] {
                let result = try await ProcessRunner.run(
                    client.0,
                    client.1 + ["-b", "a=b; c=d", httpbin.url("/cookies")]
                )
                #expect(try JSONDecoder().decode(CookieEcho.self, from: result.stdout).cookies == ["a": "b", "c": "d"])
            }
            try await withServer { server in
                // httpbin redirects to FerryTestServer on another host name (cookies, as RFC
                // 6265 has them, ignore ports: another host is what keeps them away).
                let target = "http://localhost:\(server.port)/cookies"
                let escaped = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target
                let result = try await ProcessRunner.run(
                    ferry,
                    ["get", "-q", "-b", "a=b", httpbin.url("/redirect-to?url=\(escaped)")]
                )
                #expect(result.status == 0, "\(result.stderrText)")
                #expect(server.requests.last?.headers["cookie"] == nil)
            }
        }
    }

    /// The library imports and exports Netscape files on its cookie store.
    @Test func theStoreImportsAndExportsNetscapeFiles() async throws {
        let scratch = try makeTemporaryDirectory("netscape")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let file = scratch.appendingPathComponent("cookies.txt")
        try """
        # Netscape HTTP Cookie File
        .example.com\tTRUE\t/\tTRUE\t4102444800\tpref\tdark
        #HttpOnly_example.com\tFALSE\t/account\tFALSE\t0\tsid\tx1

        """.write(to: file, atomically: true, encoding: .utf8)
        let store = CookieStore()
        try store.importNetscapeCookies(from: file)
        #expect(store.cookies(for: URL(string: "https://www.example.com/")!).map(\.name) == ["pref"])
        #expect(store.cookies(for: URL(string: "https://example.com/account/x")!).map(\.name) == ["sid", "pref"])
        let out = scratch.appendingPathComponent("out.txt")
        try store.exportNetscapeCookies(to: out)
        let again = CookieStore()
        try again.importNetscapeCookies(from: out)
        #expect(Set(again.allCookies.map(\.name)) == ["pref", "sid"])
        #expect(again.allCookies.first { $0.name == "sid" }?.httpOnly == true)
        #expect(again.allCookies.first { $0.name == "sid" }?.expires == nil)
    }
}
