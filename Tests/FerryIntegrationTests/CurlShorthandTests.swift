import Foundation
import Testing

/// What curl's users type and read, beside curl 7.88 (Debian's), against nginx: the
/// version `%{http_version}` and `-v` print, what `-v` shows of a request sent over HTTP/2,
/// `--silent` and `-S`, and `-s` without a number (ferry's `-s` is aria2c's segments).
@Suite("curl's shorthand, side by side with curl")
struct CurlShorthandTests {
    static let curl = "/usr/bin/curl"
    static var enabled: Bool { Nginx.enabled && FileManager.default.isExecutableFile(atPath: curl) }

    @Test(.enabled(if: enabled))
    func theHTTPVersionIsPrintedAsCurlPrintsIt() async throws {
        let root = try await makeHTTP2Root("http-version", mebibytes: 0)
        try Data("small\n".utf8).write(to: root.appendingPathComponent("small.txt"))
        let h2 = try await HTTP2Origin(root: root)
        defer { h2.stop() }
        let h1 = try await Nginx(serving: root)
        defer { h1.stop() }
        let cases = [
            (try h2.url("/small.txt").absoluteString, "2"), ("http://127.0.0.1:\(h1.port)/small.txt", "1.1"),
        ]
        for (url, expected) in cases {
            let out = root.appendingPathComponent("out/small.txt")
            let arguments = ["--cacert", h2.caFile.path, "-o", out.path, "-w", "%{http_version}", url]
            let ours = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q"] + arguments)
            let theirs = try await ProcessRunner.run(Self.curl, ["-s"] + arguments)
            #expect(ours.status == 0 && theirs.status == 0, "\(ours.stderrText)\(theirs.stderrText)")
            #expect(theirs.stdoutText == expected, "curl")
            #expect(ours.stdoutText == expected, "ferry beside curl for \(url)")
        }
    }

    @Test(.enabled(if: enabled))
    func verboseShowsARequestSentOverHTTP2AsCurlDoes() async throws {
        let root = try await makeHTTP2Root("verbose-h2", mebibytes: 0)
        try Data("small\n".utf8).write(to: root.appendingPathComponent("small.txt"))
        let h2 = try await HTTP2Origin(root: root)
        defer { h2.stop() }
        let url = try h2.url("/small.txt?part=1&sig=s3cr3t").absoluteString
        let out = root.appendingPathComponent("out/small.txt").path
        let ours = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-v", "--cacert", h2.caFile.path, "-o", out, url]
        )
        let theirs = try await ProcessRunner.run(Self.curl, ["-s", "-v", "--cacert", h2.caFile.path, "-o", out, url])
        #expect(ours.status == 0 && theirs.status == 0, "\(ours.stderrText)")
        let authority = "127.0.0.1:\(h2.nginx.port)"
        // curl 7.88 says "h2h3 [:method: GET]", curl 8 "[HTTP/2] [1] [:method: GET]"
        // (numbering the stream); the fields are the same. Its lines end in CR LF.
        let curlLines = Set(
            theirs.stderrText.split(whereSeparator: \.isNewline).map {
                String($0).replacing("* h2h3 [", with: "* [HTTP/2] [").replacing("[HTTP/2] [1] ", with: "[HTTP/2] ")
                    .trimmingCharacters(in: .whitespaces)
            }
        )
        for line in [
            "* [HTTP/2] [:method: GET]", "* [HTTP/2] [:scheme: https]", "* [HTTP/2] [:authority: \(authority)]",
            "> Host: \(authority)", "< HTTP/2 200",
        ] {
            #expect(curlLines.contains(line), "curl: \(line)\n\(theirs.stderrText)")
            #expect(ours.stderrText.contains(line + "\n"), "ferry: \(line)\n\(ours.stderrText)")
        }
        // curl shows the signature; ferry shows that the request line went over HTTP/2, not it.
        #expect(curlLines.contains("> GET /small.txt?part=1&sig=s3cr3t HTTP/2"))
        #expect(ours.stderrText.contains("> GET /small.txt?part=1&sig=REDACTED HTTP/2\n"), "\(ours.stderrText)")
        #expect(ours.stderrText.contains("* [HTTP/2] [:path: /small.txt?part=1&sig=REDACTED]\n"))
        #expect(!ours.stderrText.contains("s3cr3t"))
        #expect(!ours.stderrText.contains("HTTP/1.1"), "nothing over HTTP/1.1: \(ours.stderrText)")
        #expect(!ours.stderrText.contains("HTTP/2.0"))
    }

    @Test(.enabled(if: enabled))
    func silentAndShowErrorAsCurlAndDashSWithoutANumber() async throws {
        let root = try makeTemporaryDirectory("silent-root")
        try Data("small\n".utf8).write(to: root.appendingPathComponent("small.txt"))
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let base = "http://127.0.0.1:\(nginx.port)"
        let out = root.appendingPathComponent("out").path
        // --silent: nothing on standard error, the status says it (curl needs -f to fail).
        let quiet = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "--silent", "-o", out, base + "/missing"])
        let curlQuiet = try await ProcessRunner.run(Self.curl, ["--silent", "-f", "-o", out, base + "/missing"])
        #expect(quiet.status == 22 && curlQuiet.status == 22)
        #expect(quiet.stderrText.isEmpty, "\(quiet.stderrText)")
        #expect(curlQuiet.stderrText.isEmpty)
        // --show-error (-S) with it: the error is said.
        for flag in ["--show-error", "-S"] {
            let said = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--silent", flag, "-o", out, base + "/missing"]
            )
            let curlSaid = try await ProcessRunner.run(
                Self.curl,
                ["--silent", flag, "-f", "-o", out, base + "/missing"]
            )
            #expect(said.status == 22 && curlSaid.status == 22)
            #expect(said.stderrText.contains("404"), "\(said.stderrText)")
            #expect(curlSaid.stderrText.contains("404"))
        }
        // A download that succeeds says nothing either, and writes the file.
        let fine = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "--silent", "-o", out, base + "/small.txt"]
        )
        #expect(fine.status == 0 && fine.stderrText.isEmpty, "\(fine.stderrText)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "small\n")

        // -s typed by curl's hand: a usage error that names --silent, nothing downloaded.
        try FileManager.default.removeItem(atPath: out)
        for arguments in [
            ["-s", "-o", out, base + "/small.txt"], ["-sS", "-o", out, base + "/small.txt"],
            ["-o", out, base + "/small.txt", "-s"],
        ] {
            let typed = try await ProcessRunner.run(ProcessRunner.ferry, ["get"] + arguments)
            #expect(typed.status == 64, "\(arguments): \(typed.stderrText)")
            #expect(typed.stderrText.contains("did you mean --silent?"), "\(typed.stderrText)")
            #expect(typed.stderrText.contains("-s is the number of segments here, as in aria2c"))
            #expect(!FileManager.default.fileExists(atPath: out))
        }
        // With its number, -s is the segments, as before.
        let split = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-q", "-s", "2", "-o", out, base + "/small.txt"]
        )
        #expect(split.status == 0, "\(split.stderrText)")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "small\n")
    }
}
