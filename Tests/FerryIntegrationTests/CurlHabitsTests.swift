import Ferry
import FerryTestServer
import Foundation
import Testing

/// `ferry get` beside curl 7.88 (Debian's): `-w` / `--write-out`, `--etag-save` and
/// `--etag-compare`, the same arguments to both, the same outputs and exit statuses.
@Suite("curl's habits, side by side with curl")
struct CurlHabitsTests {
    static let curl = "/usr/bin/curl"
    static var curlInstalled: Bool { FileManager.default.isExecutableFile(atPath: curl) }

    /// Runs `ferry get ARGUMENTS` and `curl -s -L ARGUMENTS` (curl follows redirects only with
    /// `-L`; ferry always does).
    func both(_ arguments: [String]) async throws -> (ferry: ProcessResult, curl: ProcessResult) {
        let ferry = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q"] + arguments)
        let curl = try await ProcessRunner.run(Self.curl, ["-s", "-L"] + arguments)
        return (ferry, curl)
    }

    /// The variables whose values do not depend on the program or the moment.
    static let sameFormat =
        "%{http_code} %{response_code} %{num_redirects} %{method} %{scheme} %{http_version} %{size_header} "
        + "%{url} %{url_effective} %{content_type} %{size_download} %{exitcode} %{remote_ip} %{remote_port} "
        + "[%header{etag}] %% \\t|\\n"

    @Test(.enabled(if: curlInstalled))
    func writeOutPrintsWhatCurlPrints() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("write-out")
            let url = server.url("/redirect/2?to=/bytes/123456%3Ftype=text/csv").absoluteString
            let (ferry, curl) = try await both([
                "-o", directory.appendingPathComponent("body").path, "-w", Self.sameFormat, url,
            ])
            #expect(ferry.status == 0 && curl.status == 0)
            #expect(ferry.stdoutText == curl.stdoutText)
            #expect(ferry.stdoutText.hasPrefix("200 200 2 GET HTTP 1.1 "))
            #expect(ferry.stdoutText.contains(" \(url) "))
            #expect(ferry.stdoutText.contains(" text/csv 123456 0 127.0.0.1 "))

            // Standard error by %{stderr}; the file's name; times as seconds with six decimals.
            let format = "%{filename_effective}%{stderr}%{time_total}"
            let (named, curlNamed) = try await both([
                "-o", directory.appendingPathComponent("b2").path, "-w", format, url,
            ])
            #expect(named.stdoutText == directory.appendingPathComponent("b2").path)
            #expect(curlNamed.stdoutText == directory.appendingPathComponent("b2").path)
            for result in [named, curlNamed] {
                let seconds = String(result.stderrText.split(separator: "\n").last ?? "")
                #expect(seconds.wholeMatch(of: /[0-9]+\.[0-9]{6}/) != nil, "\(result.stderrText)")
            }
        }
    }

    @Test(.enabled(if: curlInstalled))
    func writeOutOnFailuresAndAsJSON() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("write-out-failures")
            let format = "%{http_code} %{response_code} %{exitcode}\\n"
            // An error status: curl needs -f to fail on it as ferry does.
            let missing = server.url("/status/404").absoluteString
            let ferry = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-o", directory.appendingPathComponent("f").path, "-w", format, missing]
            )
            let curl = try await ProcessRunner.run(
                Self.curl,
                ["-s", "-f", "-o", directory.appendingPathComponent("c").path, "-w", format, missing]
            )
            #expect(ferry.status == 22 && curl.status == 22)
            #expect(ferry.stdoutText == "404 404 22\n" && curl.stdoutText == ferry.stdoutText)

            // Nobody listening (ferry retries a refused connection unless told not to; curl
            // does not retry).
            let closed = "http://127.0.0.1:\(try closedPort())/"
            let refused = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--retries", "0", "-o", directory.appendingPathComponent("r").path, "-w", format, closed]
            )
            let curlRefused = try await ProcessRunner.run(
                Self.curl,
                ["-s", "-o", directory.appendingPathComponent("r2").path, "-w", format, closed]
            )
            #expect(refused.status == 7 && curlRefused.status == 7)
            #expect(refused.stdoutText == "000 000 7\n" && curlRefused.stdoutText == refused.stdoutText)

            // %{json}: the same keys mean the same, numbers as numbers.
            let (json, curlJSON) = try await both([
                "-o", directory.appendingPathComponent("j").path, "-w", "%{json}",
                server.url("/bytes/1000").absoluteString,
            ])
            let ours = try #require(try JSONSerialization.jsonObject(with: json.stdout) as? [String: Any])
            let theirs = try #require(try JSONSerialization.jsonObject(with: curlJSON.stdout) as? [String: Any])
            for key in [
                "http_code", "response_code", "exitcode", "size_download", "num_redirects", "url_effective",
                "content_type", "method", "scheme", "remote_ip", "remote_port", "filename_effective",
            ] where key != "filename_effective" {
                #expect("\(ours[key] ?? "missing")" == "\(theirs[key] ?? "missing")", "\(key)")
            }
            #expect(ours["http_code"] as? Int == 200)
            #expect(ours["errormsg"] is NSNull && theirs["errormsg"] is NSNull)

            // An unknown variable is said on standard error and prints nothing.
            let (unknown, curlUnknown) = try await both([
                "-o", directory.appendingPathComponent("u").path, "-w", "[%{nope}]",
                server.url("/bytes/1").absoluteString,
            ])
            #expect(unknown.stdoutText == "[]" && curlUnknown.stdoutText == "[]")
            #expect(unknown.stderrText.contains("unknown --write-out variable: 'nope'"))
        }
    }

    @Test(.enabled(if: curlInstalled))
    func etagSaveAndCompareAsCurlDoes() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("etag")
            func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
            let url = server.url("/cached/page").absoluteString
            // Saved: the field's value and a newline.
            let ferrySave = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-o", path("f1"), "--etag-save", path("fe"), url]
            )
            let curlSave = try await ProcessRunner.run(
                Self.curl,
                ["-s", "-o", path("c1"), "--etag-save", path("ce"), url]
            )
            #expect(ferrySave.status == 0 && curlSave.status == 0)
            let saved = try String(contentsOfFile: path("fe"), encoding: .utf8)
            #expect(saved == "\"v0\"\n")
            #expect(try String(contentsOfFile: path("ce"), encoding: .utf8) == saved)

            // Compared: 304, the output untouched (not even made), exit 0.
            let format = "%{http_code} %{exitcode}"
            let ferryCompare = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-o", path("f2"), "--etag-compare", path("fe"), "-w", format, url]
            )
            let curlCompare = try await ProcessRunner.run(
                Self.curl,
                ["-s", "-o", path("c2"), "--etag-compare", path("ce"), "-w", format, url]
            )
            #expect(ferryCompare.status == 0 && curlCompare.status == 0)
            #expect(ferryCompare.stdoutText == "304 0" && curlCompare.stdoutText == "304 0")
            #expect(
                !FileManager.default.fileExists(atPath: path("f2"))
                    && !FileManager.default.fileExists(atPath: path("c2"))
            )
            #expect(files(in: directory).filter { $0.hasPrefix(".") }.isEmpty, "no partial file left")

            // A new version: downloaded, and its ETag saved over the old one.
            server.setVersion("page", size: 0, seed: 1)
            try "\"v0\"\n".write(toFile: path("fe"), atomically: true, encoding: .utf8)
            let changed = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-o", path("f3"), "--etag-compare", path("fe"), "--etag-save", path("fe"), url]
            )
            #expect(changed.status == 0)
            #expect(try String(contentsOfFile: path("f3"), encoding: .utf8) == "page v1")
            #expect(try String(contentsOfFile: path("fe"), encoding: .utf8) == "\"v1\"\n")

            // No ETag: an empty file. No file to compare with: exit 26, as curl.
            let none = server.url("/bytes/10?etag=none").absoluteString
            let (noTag, curlNoTag) = try await both(["-o", path("n"), "--etag-save", path("ne"), none])
            #expect(noTag.status == 0 && curlNoTag.status == 0)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path("ne"))).isEmpty)
            let (missing, curlMissing) = try await both(["-o", path("m"), "--etag-compare", path("absent"), url])
            #expect(missing.status == 26 && curlMissing.status == 26)
            #expect(!FileManager.default.fileExists(atPath: path("m")))
        }
    }

    /// httpbin (gunicorn) answers `If-None-Match` on `/etag/TAG`: the same round trip against a
    /// server nobody here wrote.
    @Test(.enabled(if: curlInstalled && Httpbin.enabled))
    func etagRoundTripAgainstHttpbin() async throws {
        try await withHttpbin { httpbin in
            let directory = try makeTemporaryDirectory("etag-httpbin")
            func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
            let url = httpbin.url("/etag/abc")
            let (save, curlSave) = try await both([
                "-o", path("f"), "--etag-save", path("e"), "-w", "%{http_code}", url,
            ])
            #expect(save.stdoutText == "200" && curlSave.stdoutText == "200")
            // httpbin sends the tag bare (`ETag: abc`): saved as sent, by both.
            #expect(try String(contentsOfFile: path("e"), encoding: .utf8) == "abc\n")
            let (compare, curlCompare) = try await both([
                "-o", path("g"), "--etag-compare", path("e"), "-w", "%{http_code} %{exitcode}", url,
            ])
            #expect(compare.stdoutText == "304 0" && curlCompare.stdoutText == "304 0")
            #expect(!FileManager.default.fileExists(atPath: path("g")))
        }
    }

    /// `--retry-all-errors`: a 404 twice, then the file. Without the flag both give up at
    /// once (curl with `-f`, to fail on the status as ferry does).
    @Test(.enabled(if: curlInstalled))
    func retryAllErrorsRetriesA404() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("retry-all")
            func url(_ who: String) -> String {
                server.url("/bytes/5000?seed=4&fail-first=2&fail-status=404&who=\(who)").absoluteString
            }
            let ferryOnce = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--retries", "3", "-o", directory.appendingPathComponent("f0").path, url("ferry-once")]
            )
            let curlOnce = try await ProcessRunner.run(
                Self.curl,
                ["-s", "-f", "--retry", "3", "-o", directory.appendingPathComponent("c0").path, url("curl-once")]
            )
            #expect(ferryOnce.status == 22 && curlOnce.status == 22)
            #expect(server.requests.filter { $0.uri.contains("who=ferry-once") }.count == 1)
            #expect(server.requests.filter { $0.uri.contains("who=curl-once") }.count == 1)

            let ferry = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "-q", "--retries", "3", "--retry-all-errors", "-o",
                    directory.appendingPathComponent("f").path,
                    url("ferry"),
                ]
            )
            let curl = try await ProcessRunner.run(
                Self.curl,
                [
                    "-s", "-f", "--retry", "3", "--retry-all-errors", "--retry-delay", "1", "-o",
                    directory.appendingPathComponent("c").path, url("curl"),
                ]
            )
            #expect(ferry.status == 0 && curl.status == 0, "\(ferry.stderrText) \(curl.stderrText)")
            #expect(
                server.requests.filter { $0.uri.contains("who=ferry&") || $0.uri.hasSuffix("who=ferry") }.count == 3
            )
            #expect(server.requests.filter { $0.uri.hasSuffix("who=curl") }.count == 3)
            let expected = TestContent.data(size: 5000, seed: 4)
            #expect(try Data(contentsOf: directory.appendingPathComponent("f")) == expected)
            #expect(try Data(contentsOf: directory.appendingPathComponent("c")) == expected)
        }
    }
}
