import Ferry
import FerryTestServer
import Foundation
import Testing

@Suite("ferry upload and ferry put (the real executable)", .serialized)
struct UploadCLITests {
    let ferry = ProcessRunner.ferry

    /// The upload issue's check: a 1 GiB file part to FerryTestServer's sink, whose SHA-256
    /// of the part matches, with the client's peak resident memory under 64 MiB.
    @Test func oneGibibyteFilePartInBoundedMemory() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("upload-1g")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let big = scratch.appendingPathComponent("big.bin")
            try await makeRandomFile(big, mebibytes: 1024)
            let expected = try await sha256(of: big)
            let result = try await ProcessRunner.run(
                ferry,
                [
                    "upload", "--quiet", "-F", "title=big", "-F", "file=@\(big.path)",
                    server.url("/sink?parser=scan").absoluteString,
                ]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            let sink = try JSONDecoder().decode(SinkReport.self, from: result.stdout)
            #expect(sink.multipartError == nil)
            #expect(sink.bytes == sink.contentLength)
            let parts = try #require(sink.parts)
            #expect(parts.count == 2)
            #expect(parts.last?.bytes == 1 << 30)
            #expect(parts.last?.sha256 == expected)
            #expect(result.maxResidentKiB > 1024, "the peak RSS was not measured")
            #expect(result.maxResidentKiB < 64 * 1024, "peak RSS \(result.maxResidentKiB) KiB")
            print("ferry upload 1 GiB: peak RSS \(result.maxResidentKiB / 1024) MiB")
        }
    }

    /// `ferry upload` and `curl -F` with the same arguments: Werkzeug parses the same form.
    @Test(
        .enabled(
            if: FormEcho.required
                || (FormEcho.isAvailable && FileManager.default.isExecutableFile(atPath: "/usr/bin/curl"))
        )
    )
    func sameFormAsCurl() async throws {
        let scratch = try makeTemporaryDirectory("vs-curl")
        let text = scratch.appendingPathComponent("notes.txt")
        try Data("some notes\n".utf8).write(to: text)
        let image = scratch.appendingPathComponent("pixel.png")
        try TestContent.data(size: 4321, seed: 41).write(to: image)
        let empty = scratch.appendingPathComponent("empty.dat")
        try Data().write(to: empty)
        let arguments = [
            "-F", "user=ada", "-F", "quote=\"a;b\"", "-F", "notes=@\(text.path)",
            "-F", "pic=@\(image.path);type=image/x-custom", "-F", "renamed=@\(text.path);filename=other.txt",
            "-F", "empty=@\(empty.path)", "-F", "inline=<\(text.path)", "-F", "unicode=naïve ü",
        ]
        let echo = try await FormEcho()
        defer { echo.stop() }
        let ours = try await ProcessRunner.run(ferry, ["upload", "--quiet"] + arguments + [echo.url])
        let theirs = try await ProcessRunner.run("/usr/bin/curl", ["-s"] + arguments + [echo.url])
        #expect(ours.status == 0 && theirs.status == 0, "\(ours.stderrText) \(theirs.stderrText)")
        var ourForm = try JSONDecoder().decode(FormEcho.Form.self, from: ours.stdout)
        var curlForm = try JSONDecoder().decode(FormEcho.Form.self, from: theirs.stdout)
        // The bodies differ only in boundaries; the parsed forms must be equal.
        ourForm.contentLength = 0
        curlForm.contentLength = 0
        #expect(ourForm == curlForm)
        #expect(ourForm.fields.contains(["quote", "a;b"]))
        #expect(ourForm.files.contains { $0.name == "pic" && $0.contentType == "image/x-custom" && $0.size == 4321 })
    }

    @Test func putSendsTheRawFile() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("put")
            let file = scratch.appendingPathComponent("data.json")
            try Data(#"{"k":1}"#.utf8).write(to: file)
            let result = try await ProcessRunner.run(
                ferry,
                ["put", "-u", "ada:pw", file.path, server.url("/sink").absoluteString]
            )
            #expect(result.status == 0)
            let sink = try JSONDecoder().decode(SinkReport.self, from: result.stdout)
            #expect(sink.method == "PUT")
            #expect(sink.bytes == 7)
            #expect(server.requests.last?.headers["content-type"] == "application/json")
            // -u is sent as Basic at once, as curl sends it.
            #expect(server.requests.last?.headers["authorization"] == "Basic YWRhOnB3")
            let patch = try await ProcessRunner.run(
                ferry,
                ["put", "-X", "PATCH", file.path, server.url("/sink").absoluteString]
            )
            #expect(try JSONDecoder().decode(SinkReport.self, from: patch.stdout).method == "PATCH")
            let missing = try await ProcessRunner.run(
                ferry,
                ["put", "/nonexistent/file", server.url("/sink").absoluteString]
            )
            #expect(missing.status == 23)
            let rejected = try await ProcessRunner.run(
                ferry,
                ["put", file.path, server.url("/status/403").absoluteString]
            )
            #expect(rejected.status == 22)
        }
    }

    @Test func uploadArgumentsAndErrors() async throws {
        try await withServer { server in
            let noParts = try await ProcessRunner.run(ferry, ["upload", server.url("/sink").absoluteString])
            #expect(noParts.status == 64)
            let badPart = try await ProcessRunner.run(
                ferry,
                ["upload", "-F", "novalue", server.url("/sink").absoluteString]
            )
            #expect(badPart.status == 64)
            let missingFile = try await ProcessRunner.run(
                ferry,
                ["upload", "-F", "f=@/nonexistent", server.url("/sink").absoluteString]
            )
            #expect(missingFile.status == 23)
            let response = try makeTemporaryDirectory("upload-json").appendingPathComponent("response.json")
            let json = try await ProcessRunner.run(
                ferry,
                ["upload", "--json", "-o", response.path, "-F", "a=b", server.url("/sink").absoluteString]
            )
            #expect(try JSONDecoder().decode(SinkReport.self, from: Data(contentsOf: response)).bytes > 0)
            #expect(json.status == 0)
            let events = json.stdoutText.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["event"] as? String
            }
            #expect(events.first == "resumed")
            #expect(events.last == "completed")
        }
    }
}

/// A Werkzeug form echo (Support/form_echo.py) on a free loopback port, started and stopped
/// by the test.
final class FormEcho: Sendable {
    struct Form: Decodable, Equatable {
        struct File: Decodable, Equatable {
            var name: String
            var fileName: String
            var contentType: String
            var size: Int64
            var sha256: String

            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                name = try container.decode(String.self)
                fileName = try container.decode(String.self)
                contentType = try container.decode(String.self)
                size = try container.decode(Int64.self)
                sha256 = try container.decode(String.self)
            }
        }

        var contentLength: Int64
        var fields: [[String]]
        var files: [File]
    }

    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/form_echo.py")

    /// Set by CI: the Werkzeug tests must run, not be skipped.
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_FORM_ECHO"] == "1" }

    static let isAvailable = pythonCanImport("werkzeug") && FileManager.default.fileExists(atPath: script.path)

    let url: String
    private let pid: pid_t

    init() async throws {
        let port = try Nginx.freePort()
        url = "http://127.0.0.1:\(port)/"
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("form-echo-\(port).log").path
        pid = try ProcessRunner.spawn(
            "/usr/bin/env",
            ["python3", Self.script.path, String(port)],
            stdout: log,
            stderr: log
        )
        try await ProcessRunner.expectListening(pid: pid, port: port, server: "the form echo", logs: [log])
    }

    func stop() { ProcessRunner.stop(pid) }
}
