import Foundation
import Testing

/// `-v`: the conversation on standard error as `curl -v` shows it, against nginx, with
/// credentials redacted (curl prints them; Ferry does not).
@Suite("ferry -v (the real executable)")
struct VerboseTests {
    @Test(.enabled(if: Nginx.enabled))
    func verboseShowsTheHeadsLikeCurlWithCredentialsRedacted() async throws {
        let root = try makeTemporaryDirectory("verbose-root")
        try Data("hello\n".utf8).write(to: root.appendingPathComponent("hello.txt"))
        let nginx = try await Nginx(serving: root, server: "location = /old { return 301 /hello.txt; }")
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/old"
        let ours = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-v", "-u", "ada:pw", url])
        let theirs = try await ProcessRunner.run("/usr/bin/curl", ["-s", "-v", "-L", "-u", "ada:pw", url])
        #expect(ours.status == 0, "\(ours.stderrText)")
        #expect(ours.stdoutText == "hello\n")
        // The lines both tools print for the two exchanges.
        for line in [
            "> GET /old HTTP/1.1", "> Host: 127.0.0.1:\(nginx.port)", "< HTTP/1.1 301 Moved Permanently",
            "> GET /hello.txt HTTP/1.1", "< HTTP/1.1 200 OK", "< Content-Length: 6",
        ] {
            #expect(ours.stderrText.contains(line), "ferry: \(line)\n\(ours.stderrText)")
            #expect(theirs.stderrText.contains(line), "curl: \(line)")
        }
        #expect(ours.stderrText.contains("> Authorization: <redacted>"))
        #expect(!ours.stderrText.contains("YWRhOnB3"))
        #expect(ours.stderrText.contains("* redirect"))
    }
}
