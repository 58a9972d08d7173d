import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An nginx with Basic authentication on `/private/` (user ada, password pw) and an
/// access log that shows every request's status.
private func authNginx(_ root: URL) async throws -> Nginx {
    try "ada:{PLAIN}pw\n".write(to: root.appendingPathComponent("htpasswd"), atomically: true, encoding: .utf8)
    try FileManager.default.createDirectory(
        at: root.appendingPathComponent("private"),
        withIntermediateDirectories: true
    )
    try "secret\n".write(to: root.appendingPathComponent("private/s.txt"), atomically: true, encoding: .utf8)
    return try await Nginx(
        serving: root,
        server: """
            location /private/ { auth_basic "ferry"; auth_basic_user_file \(root.path)/htpasswd; }
            """
    )
}

/// curl's credentials: `-u` sent at once, `--digest` / `--anyauth` answering challenges,
/// `.netrc`, and credentials that never leave their origin, with nginx and httpbin.
@Suite("curl's credentials", .serialized)
struct CredentialTests {
    let ferry = ProcessRunner.ferry
    let curl = "/usr/bin/curl"

    /// `-u` sends Basic with the first request, as curl does: nginx logs one 200 for each,
    /// no 401 first. `--anyauth` waits for the challenge (401, then 200).
    @Test(.enabled(if: Nginx.enabled))
    func dashUSendsBasicAtOnceLikeCurl() async throws {
        let root = try makeTemporaryDirectory("auth-nginx")
        defer { try? FileManager.default.removeItem(at: root) }
        let nginx = try await authNginx(root)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/private/s.txt"
        let ours = try await ProcessRunner.run(ferry, ["get", "-q", "-u", "ada:pw", url])
        let theirs = try await ProcessRunner.run(curl, ["-s", "-u", "ada:pw", url])
        #expect(ours.stdoutText == "secret\n")
        #expect(ours.stdoutText == theirs.stdoutText)
        let any = try await ProcessRunner.run(ferry, ["get", "-q", "--anyauth", "-u", "ada:pw", url])
        #expect(any.stdoutText == "secret\n")
        let log = try String(contentsOf: nginx.accessLog, encoding: .utf8)
        #expect(
            log
                == "GET /private/s.txt 200 7\nGET /private/s.txt 200 7\nGET /private/s.txt 401 179\nGET /private/s.txt 200 7\n"
        )
    }

    /// httpbin's Basic endpoint (which answers 401 without a challenge-worthy retry path
    /// for clients that wait), and its Digest endpoint with `--digest`, as curl.
    @Test(.enabled(if: Httpbin.enabled))
    func basicAndDigestWithHttpbinLikeCurl() async throws {
        try await withHttpbin { httpbin in
            for (path, flags) in [("/basic-auth/ada/pw", [String]()), ("/digest-auth/auth/ada/pw", ["--digest"])] {
                let ours = try await ProcessRunner.run(
                    ferry,
                    ["get", "-q"] + flags + ["-u", "ada:pw", httpbin.url(path)]
                )
                let theirs = try await ProcessRunner.run(curl, ["-sf"] + flags + ["-u", "ada:pw", httpbin.url(path)])
                #expect(ours.status == 0, "\(path): \(ours.stderrText)")
                #expect(theirs.status == 0)
                #expect(ours.stdoutText.contains(#""authenticated": true"#))
            }
        }
    }

    /// `-n` reads `~/.netrc` and `--netrc-file` a named file (machine, default, login,
    /// password, quoted values); a file others may read is refused; curl reads the same
    /// files the same way.
    @Test(.enabled(if: Nginx.enabled))
    func netrcFilesLikeCurl() async throws {
        let root = try makeTemporaryDirectory("netrc-nginx")
        defer { try? FileManager.default.removeItem(at: root) }
        let nginx = try await authNginx(root)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/private/s.txt"
        let home = root.appendingPathComponent("home")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let netrc = home.appendingPathComponent(".netrc")
        try """
        machine elsewhere.example login nobody password nothing
        macdef init
        cd /pub

        machine 127.0.0.1
          login ada
          password "pw"
        default login someone password else
        """.write(to: netrc, atomically: true, encoding: .utf8)
        chmod(netrc.path, 0o600)
        let environment = ["HOME": home.path]
        let ours = try await ProcessRunner.run(ferry, ["get", "-q", "-n", url], environment: environment)
        let theirs = try await ProcessRunner.run(curl, ["-s", "-n", url], environment: environment)
        #expect(ours.stdoutText == "secret\n", "\(ours.stderrText)")
        #expect(ours.stdoutText == theirs.stdoutText)
        let named = try await ProcessRunner.run(ferry, ["get", "-q", "--netrc-file", netrc.path, url])
        #expect(named.stdoutText == "secret\n")
        // Without -n, no credentials (curl's default): nginx says 401.
        let without = try await ProcessRunner.run(ferry, ["get", "-q", url], environment: environment)
        #expect(without.status == 22)
        // Readable by others: refused, nothing sent.
        chmod(netrc.path, 0o644)
        let open = try await ProcessRunner.run(ferry, ["get", "-q", "--netrc-file", netrc.path, url])
        #expect(open.status == 23)
        #expect(open.stderrText.contains("chmod 600"))
        // -n with no ~/.netrc: no credentials, no error of its own.
        try FileManager.default.removeItem(at: netrc)
        let missing = try await ProcessRunner.run(ferry, ["get", "-q", "-n", url], environment: environment)
        #expect(missing.status == 22)
    }

    /// Credentials from any source stay with their origin: `-u`, `-H Authorization`, netrc
    /// and `-b` are not sent to another origin a redirect leads to, nor on the retries there
    /// (the other server drops the first connection after 1,000 bytes, so the download
    /// continues with a range).
    @Test("13.1: credentials never leave their origin across redirects and retries")
    func credentialsNeverLeaveTheirOriginAcrossRedirectsAndRetries() async throws {
        try await withServer { home in
            try await withServer { other in
                let scratch = try makeTemporaryDirectory("leak")
                defer { try? FileManager.default.removeItem(at: scratch) }
                let netrc = scratch.appendingPathComponent("netrc")
                try "default login ada password pw\n".write(to: netrc, atomically: true, encoding: .utf8)
                chmod(netrc.path, 0o600)
                // Another host name, not only another port: cookies ignore ports (RFC 6265).
                let target = "http://localhost:\(other.port)/bytes/200000?seed=8&close-after=1000"
                let escaped = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target
                let start = home.url("/redirect-to?url=\(escaped)").absoluteString
                let runs = [
                    ["-u", "ada:pw"], ["-H", "Authorization: Bearer TOKEN"], ["--netrc-file", netrc.path],
                    ["-b", "sid=1"], ["--anyauth", "-u", "ada:pw"],
                ]
                for credentials in runs {
                    let output = scratch.appendingPathComponent("out.bin")
                    let before = other.requests.count
                    let result = try await ProcessRunner.run(
                        ferry,
                        ["get", "-q", "--retries", "2", "-o", output.path] + credentials + [start]
                    )
                    // close-after cuts every response: the retries run out, having resumed.
                    #expect(result.status != 0)
                    let there = other.requests.dropFirst(before).filter { $0.uri.hasPrefix("/bytes/200000") }
                    #expect(there.count == 3, "\(credentials)")
                    #expect(there.dropFirst().allSatisfy { $0.headers["range"] != nil }, "\(credentials)")
                    for request in there {
                        #expect(request.headers["authorization"] == nil, "\(credentials) leaked")
                        #expect(request.headers["cookie"] == nil, "\(credentials) leaked")
                    }
                    try? FileManager.default.removeItem(at: output)
                }
                // On the home origin, the credential did arrive.
                #expect(home.requests.contains { $0.headers["authorization"] == "Basic YWRhOnB3" })
            }
        }
    }
}
