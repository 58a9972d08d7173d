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
            #expect(try await sha256(of: output) == TestContent.sha256(size: 2_000_000, seed: 6))
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
            #expect(events.suffix(3) == ["saved", "metrics", "completed"])
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
            // With --digest, -u answers a Digest challenge, and a wrong password ends in the 401.
            let digest = try await ProcessRunner.run(
                ferry,
                [
                    "get", "-q", "--digest", "-u", "ada:secret",
                    server.url("/digest-auth/auth/ada/secret/SHA-256").absoluteString,
                ]
            )
            #expect(digest.status == 0)
            #expect(digest.stdoutText.contains(#""authenticated":true"#))
            let wrong = try await ProcessRunner.run(
                ferry,
                [
                    "get", "-q", "--digest", "-u", "ada:nope",
                    server.url("/digest-auth/auth/ada/secret/MD5").absoluteString,
                ]
            )
            #expect(wrong.status == 22)
        }
    }
}

@Suite("ferry get interrupted and continued", .serialized)
struct CLIInterruptTests {
    let ferry = ProcessRunner.ferry

    /// Starts `ferry ARGS` in the background.
    func start(_ arguments: [String], scratch: URL) throws -> pid_t {
        try ProcessRunner.spawn(
            ferry,
            arguments,
            stdout: scratch.appendingPathComponent("stdout").path,
            stderr: scratch.appendingPathComponent("stderr").path
        )
    }

    /// Waits for `pid` to exit and returns its exit status (128 + N for signal N).
    func wait(_ pid: pid_t) async throws -> Int32 {
        var status: Int32 = 0
        for _ in 0..<1000 {
            if waitpid(pid, &status, WNOHANG) == pid {
                return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(pid, SIGKILL)
        Issue.record("ferry did not exit")
        return -1
    }

    func waitForPartial(in directory: URL, atLeast bytes: Int64) async throws {
        for _ in 0..<3000 {
            let sizes = files(in: directory).filter { $0.hasSuffix(".partial") }.compactMap {
                try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent($0).path)[.size]
                    as? Int64
            }
            if sizes.contains(where: { $0 >= bytes }) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no partial file of \(bytes) bytes appeared")
    }

    func partialSizes(in directory: URL) -> [Int64] {
        files(in: directory).filter { $0.hasSuffix(".partial") }.compactMap {
            try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent($0).path)[.size]
                as? Int64
        }
    }

    func waitForPartial(in directory: URL, below bytes: Int64) async throws {
        for _ in 0..<6000 {
            if partialSizes(in: directory).contains(where: { $0 < bytes }) { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the partial file never went below \(bytes) bytes")
    }

    @Test func ctrlCKeepsTheBytesAndDashCContinuesThem() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cli-int")
            let output = scratch.appendingPathComponent("out.bin")
            let url = server.url("/bytes/1000000?seed=8&drip=20000&interval=20").absoluteString
            let pid = try start(["get", "-o", output.path, url], scratch: scratch)
            try await waitForPartial(in: scratch, atLeast: 100_000)
            kill(pid, SIGINT)
            #expect(try await wait(pid) == 130)
            let message = try String(contentsOf: scratch.appendingPathComponent("stderr"), encoding: .utf8)
            #expect(message.contains("with -c to continue"), "\(message)")
            #expect(!FileManager.default.fileExists(atPath: output.path))
            let kept = try #require(try storedResumeData(in: scratch))
            #expect(kept.bytesOnDisk >= 100_000)

            let before = server.requests.count
            let continued = try await ProcessRunner.run(ferry, ["get", "-c", "-o", output.path, url])
            #expect(continued.status == 0, "\(continued.stderrText)")
            #expect(continued.stderrText.contains("continued at byte \(kept.bytesOnDisk)"))
            #expect(server.requests[before].headers["range"] == "bytes=\(kept.bytesOnDisk)-")
            #expect(server.requests[before].headers["if-range"] == "\"f4240-8\"")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 1_000_000, seed: 8))
            #expect(files(in: scratch).filter { $0.hasPrefix(".ferry") }.isEmpty, "\(files(in: scratch))")
        }
    }

    /// The resume issue's check: `kill -9` during a slow download, then `ferry get -c`.
    @Test func killDashNineThenContinueFromTheLastCheckpoint() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cli-kill")
            let output = scratch.appendingPathComponent("out.bin")
            // 2 MB at about 200 KB/s: ten seconds if left alone.
            let url = server.url("/bytes/2000000?seed=9&drip=10000&interval=50").absoluteString
            let pid = try start(["get", "-o", output.path, url], scratch: scratch)
            // Run past at least one checkpoint (every second: waited for as a state, not a
            // time), then kill without warning.
            for _ in 0..<3000 where (try? storedResumeData(in: scratch)) == nil {
                try await Task.sleep(for: .milliseconds(20))
            }
            kill(pid, SIGKILL)
            #expect(try await wait(pid) == 128 + SIGKILL)
            let checkpoint = try #require(try storedResumeData(in: scratch), "no checkpoint within a minute")
            #expect(checkpoint.bytesOnDisk > 0)

            let before = server.requests.count
            let continued = try await ProcessRunner.run(ferry, ["get", "-c", "-o", output.path, url])
            #expect(continued.status == 0, "\(continued.stderrText)")
            let first = server.requests[before]
            let range = try #require(first.headers["range"])
            let offset = try #require(Int64(range.dropFirst("bytes=".count).dropLast()))
            #expect(offset >= checkpoint.bytesOnDisk)
            #expect(first.headers["if-range"] == "\"1e8480-9\"")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 2_000_000, seed: 9))
        }
    }

    @Test func withoutDashCAnEarlierPartialIsStartedOver() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cli-over")
            let output = scratch.appendingPathComponent("out.bin")
            let failing = try await ProcessRunner.run(
                ferry,
                [
                    "get", "--retries", "0", "-o", output.path,
                    server.url("/bytes/300000?close-after=100000").absoluteString,
                ]
            )
            #expect(failing.status == 8)
            #expect(try storedResumeData(in: scratch) != nil)
            let before = server.requests.count
            let fresh = try await ProcessRunner.run(
                ferry,
                ["get", "-o", output.path, server.url("/bytes/300000").absoluteString]
            )
            #expect(fresh.status == 0)
            #expect(server.requests[before].headers["range"] == nil)
            #expect(try Data(contentsOf: output) == TestContent.data(size: 300_000))
            #expect(files(in: scratch).filter { $0.hasPrefix(".ferry") }.isEmpty, "\(files(in: scratch))")
        }
    }

    /// After any number of interruptions, the destination, when it exists, is one version.
    @Test func interruptionsNeverMixTwoVersions() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cli-versions")
            let output = scratch.appendingPathComponent("out.bin")
            let size: Int64 = 600_000
            let url = server.url("/versioned/doc?drip=30000&interval=20").absoluteString
            let versions = (1...2).map { TestContent.data(size: size, seed: UInt64($0)) }
            for round in 0..<8 {
                let seed = UInt64(round % 3 == 2 ? 2 : 1)
                server.setVersion("doc", size: size, seed: seed)
                let pid = try start(["get", "-c", "--retries", "0", "-o", output.path, url], scratch: scratch)
                try await Task.sleep(for: .milliseconds(Int.random(in: 50...500)))
                kill(pid, [SIGKILL, SIGINT][round % 2])
                _ = try await wait(pid)
                if FileManager.default.fileExists(atPath: output.path) {
                    let content = try Data(contentsOf: output)
                    #expect(versions.contains(content), "round \(round): the output mixes versions")
                }
            }
            server.setVersion("doc", size: size, seed: 2)
            let last = try await ProcessRunner.run(ferry, ["get", "-c", "-o", output.path, url])
            #expect(last.status == 0, "\(last.stderrText)")
            #expect(try Data(contentsOf: output) == versions[1])
        }
    }

    /// The crash window behind "never a mix of two versions": the resource changes, the
    /// download restarts and writes the new version's bytes, and the process dies before its
    /// first checkpoint. The metadata must not still describe the old version's bytes.
    @Test func crashAfterARestartNeverLeavesStaleMetadata() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("cli-stale")
            let output = scratch.appendingPathComponent("out.bin")
            let size: Int64 = 20_000_000
            let url = server.url("/versioned/big").absoluteString
            // 1. Version 1, slowly, killed after its first checkpoint.
            server.setVersion("big", size: size, seed: 1)
            let first = try start(["get", "-o", output.path, url + "?drip=50000&interval=50"], scratch: scratch)
            // Killed once its first checkpoint is stored (a state, not a time: a loaded
            // machine starts the process and reaches the checkpoint later).
            for _ in 0..<3000 where (try? storedResumeData(in: scratch)) == nil {
                try await Task.sleep(for: .milliseconds(20))
            }
            kill(first, SIGKILL)
            _ = try await wait(first)
            let checkpoint = try #require(try storedResumeData(in: scratch))
            #expect(checkpoint.validator == .entityTag("\"1312d00-1\""))
            // 2. Version 2 now: -c restarts (the file is cut below the old checkpoint) and
            //    dies while it writes version 2's first bytes, before its own checkpoint. It
            //    writes slowly, so the state waited for lasts seconds, not a moment.
            server.setVersion("big", size: size, seed: 2)
            let second = try start(
                ["get", "-c", "-o", output.path, url + "?drip=10000&interval=100"],
                scratch: scratch
            )
            try await waitForPartial(in: scratch, below: checkpoint.bytesOnDisk)  // the restart
            try await waitForPartial(in: scratch, atLeast: 20_000)  // version 2's bytes
            kill(second, SIGKILL)
            _ = try await wait(second)
            // 3. Version 1 again: whatever -c keeps must be version 1's bytes.
            server.setVersion("big", size: size, seed: 1)
            let third = try await ProcessRunner.run(ferry, ["get", "-c", "-o", output.path, url])
            #expect(third.status == 0, "\(third.stderrText)")
            #expect(
                try await sha256(of: output) == TestContent.sha256(size: size, seed: 1),
                "the output mixes two versions"
            )
        }
    }
}
