import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("ferry get (the real executable)")
struct CLITests {
    let ferry = ProcessRunner.ferry

    @Test func executableWasBuilt() {
        #expect(FileManager.default.isExecutableFile(atPath: ferry), "build the package first: \(ferry)")
    }

    @Test func downloadsToAFileAndToStandardOutput() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("cli")
            let output = directory.appendingPathComponent("out.bin")
            let toFile = try await ProcessRunner.run(
                ferry,
                ["get", server.url("/bytes/2000000?seed=6").absoluteString, "-o", output.path]
            )
            #expect(toFile.status == 0, "\(toFile.stderrText)")
            #expect(try sha256(of: output) == TestContent.sha256(size: 2_000_000, seed: 6))
            let toStdout = try await ProcessRunner.run(
                ferry,
                ["get", "--quiet", server.url("/bytes/70000?seed=2").absoluteString]
            )
            #expect(toStdout.status == 0)
            #expect(toStdout.stdout == TestContent.data(size: 70000, seed: 2))
            #expect(files(in: directory) == ["out.bin"])
        }
    }

    @Test func httpErrorExitsNonZeroAndLeavesTheOutputAlone() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("cli")
            let absent = directory.appendingPathComponent("absent.bin")
            let missing = try await ProcessRunner.run(
                ferry,
                ["get", server.url("/status/404").absoluteString, "-o", absent.path]
            )
            #expect(missing.status == 22)
            #expect(missing.stderrText.hasPrefix("ferry: "))
            #expect(missing.stderrText.contains("404"))
            #expect(missing.stderrText.split(separator: "\n").count == 1)
            #expect(!FileManager.default.fileExists(atPath: absent.path))

            let existing = directory.appendingPathComponent("existing.bin")
            try Data("precious".utf8).write(to: existing)
            let failed = try await ProcessRunner.run(
                ferry,
                ["get", "--retries", "0", server.url("/status/503").absoluteString, "-o", existing.path]
            )
            #expect(failed.status == 22)
            #expect(try Data(contentsOf: existing) == Data("precious".utf8))
            let truncated = try await ProcessRunner.run(
                ferry,
                [
                    "get", "--retries", "0", server.url("/bytes/100000?close-after=5000").absoluteString, "-o",
                    existing.path,
                ]
            )
            #expect(truncated.status == 8)
            #expect(try Data(contentsOf: existing) == Data("precious".utf8))
            // A failed run keeps its hidden partial (and its resume data) for a later resume.
            #expect(files(in: directory).filter { !$0.hasPrefix(".") } == ["existing.bin"])
        }
    }

    @Test func serverChosenNameLandsInsideTheDirectory() async throws {
        try await withServer { server in
            let root = try makeTemporaryDirectory("cli")
            let inside = root.appendingPathComponent("D")
            let result = try await ProcessRunner.run(
                ferry,
                ["get", "-O", "--dir", inside.path, server.url("/bytes/10?filename=../../x").absoluteString]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(files(in: inside) == ["x"])
            #expect(files(in: root) == ["D"])
            #expect(try Data(contentsOf: inside.appendingPathComponent("x")) == TestContent.data(size: 10))
        }
    }

    @Test func jsonEventsAreOneObjectPerLine() async throws {
        try await withServer { server in
            let output = try makeTemporaryDirectory("cli").appendingPathComponent("j.bin")
            let result = try await ProcessRunner.run(
                ferry,
                ["get", "--json", "-o", output.path, server.url("/redirect/1?to=/bytes/300000").absoluteString]
            )
            #expect(result.status == 0)
            let lines = result.stdoutText.split(separator: "\n")
            let objects = try lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            let events = objects.compactMap { $0?["event"] as? String }
            #expect(events.count == lines.count)
            #expect(events.first == "resumed")
            #expect(events.contains("redirect"))
            #expect(events.contains("response"))
            #expect(events.suffix(2) == ["saved", "completed"])
            let failure = try await ProcessRunner.run(
                ferry,
                ["get", "--json", "-o", output.path, server.url("/status/404").absoluteString]
            )
            #expect(failure.status == 22)
            #expect(failure.stdoutText.contains(#""event":"failed""#))
        }
    }

    @Test func usageAndURLErrors() async throws {
        let badURL = try await ProcessRunner.run(ferry, ["get", "ftp://example.com/file"])
        #expect(badURL.status == 3)
        #expect(badURL.stderrText.contains("not an http or https URL"))
        let badHeader = try await ProcessRunner.run(ferry, ["get", "-H", "no colon", "http://127.0.0.1:1/"])
        #expect(badHeader.status == 64)
        let both = try await ProcessRunner.run(ferry, ["get", "-o", "a", "-O", "http://127.0.0.1:1/"])
        #expect(both.status == 64)
        let refused = try await ProcessRunner.run(ferry, ["get", "-o", "/tmp/never", "http://127.0.0.1:1/"])
        #expect(refused.status == 7)
        let missingDirectory = "/tmp/ferry-no-such-dir-\(UUID().uuidString)"
        let noParent = try await ProcessRunner.run(
            ferry,
            ["get", "-o", missingDirectory + "/f", "http://127.0.0.1:1/"]
        )
        #expect(noParent.status == 23)
        #expect(!FileManager.default.fileExists(atPath: missingDirectory))
    }

    @Test func headersAndBasicAuthReachTheServer() async throws {
        try await withServer { server in
            let ok = try await ProcessRunner.run(
                ferry,
                [
                    "get", "-q", "-u", "ada:secret", "-H", "X-Trace: 42",
                    server.url("/basic-auth/ada/secret").absoluteString,
                ]
            )
            #expect(ok.status == 0)
            #expect(ok.stdoutText.contains(#""authenticated":true"#))
            let denied = try await ProcessRunner.run(
                ferry,
                ["get", "-q", server.url("/basic-auth/ada/secret").absoluteString]
            )
            #expect(denied.status == 22)
        }
    }
}

@Suite("ferry get interrupted")
struct CLIInterruptTests {
    @Test func ctrlCRemovesThePartialAndExits130() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cli-int")
            let output = scratch.appendingPathComponent("out.bin")
            // ferry keeps the partial file beside the output, hidden.
            let partials = scratch
            let pid = try ProcessRunner.spawn(
                ProcessRunner.ferry,
                ["get", "-o", output.path, server.url("/bytes/100000?drip=1000&interval=50").absoluteString],
                stdout: scratch.appendingPathComponent("stdout").path,
                stderr: scratch.appendingPathComponent("stderr").path,
                environment: ["TMPDIR": scratch.path]
            )
            // Wait until the partial file exists, then interrupt.
            var sawPartial = false
            for _ in 0..<200 where !sawPartial {
                sawPartial = files(in: partials).contains { $0.hasSuffix(".partial") }
                if !sawPartial { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(sawPartial)
            kill(pid, SIGINT)
            var status: Int32 = 0
            for _ in 0..<500 {
                if waitpid(pid, &status, WNOHANG) == pid { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect((status >> 8) & 0xFF == 130, "status \(status)")
            #expect(!FileManager.default.fileExists(atPath: output.path))
            #expect(files(in: partials).allSatisfy { $0 == "stdout" || $0 == "stderr" }, "\(files(in: partials))")
        }
    }
}
