import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `kill -9` of `ferry get`, then `ferry get -c`, in the same boot: the continuation starts
/// at the bytes the killed process wrote, not at its last checkpoint. Checkpoints (flushed,
/// once a second) bound what a power loss takes; a process that dies leaves what it wrote
/// in the file, and resume data names the boot it was written in, so the benchmark's resume
/// at 50 % of 1 GiB on loopback (killed before its first checkpoint) fetched 518 MiB twice.
/// A boot that is not the one the resume data names keeps only what was flushed.
@Suite("Resume after kill -9, in the same boot", .serialized)
struct KilledProcessResumeTests {
    /// The partial file `ferry get` writes beside `output`, and its length.
    private func partial(beside output: URL) -> (URL, Int64)? {
        let directory = output.deletingLastPathComponent()
        guard let name = files(in: directory).first(where: { $0.hasSuffix(".partial") }) else { return nil }
        let url = directory.appendingPathComponent(name)
        let size = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int64) ?? 0
        return (url, size)
    }

    /// Writes the 50,000 bytes that follow `cut`'s checkpoint into its partial file, as a
    /// process killed before its next checkpoint would have written them.
    private func appendTheNextBytes(to cut: ResumeData, size: Int64, seed: UInt64) throws {
        let start = Int(cut.bytesOnDisk)
        let file = try FileHandle(forWritingTo: cut.partialFile)
        try file.seekToEnd()
        try file.write(contentsOf: TestContent.data(size: size, seed: seed)[start..<start + 50_000])
        try file.close()
    }

    /// Runs `ferry get -o output url`, kills it with SIGKILL once its resume data is recorded
    /// and `atLeast` bytes are in its partial file; returns the partial file's length then.
    private func killed(_ url: String, output: URL, atLeast: Int64) async throws -> Int64 {
        let scratch = output.deletingLastPathComponent()
        let pid = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            ["get", "-q", "-o", output.path, url],
            stdout: scratch.appendingPathComponent("stdout").path,
            stderr: scratch.appendingPathComponent("stderr").path
        )
        var seen: Int64 = 0
        for _ in 0..<3000 {
            if let (_, size) = partial(beside: output), size >= atLeast, (try? storedResumeData(in: scratch)) != nil {
                seen = size
                break
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        DaemonProcess.killNine(pid)
        try #require(seen >= atLeast, "the download never reached \(atLeast) bytes with resume data")
        return partial(beside: output)?.1 ?? seen
    }

    @Test func theContinuationStartsWhereTheKilledProcessStopped() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("killed-resume")
            let output = scratch.appendingPathComponent("out.bin")
            let size: Int64 = 24_000_000
            // About 6 MB/s: the kill lands at 6 MB, between checkpoints, before the end.
            let url = server.url("/bytes/\(size)?seed=21&drip=65536&interval=10").absoluteString
            let written = try await killed(url, output: output, atLeast: 6_000_000)
            let checkpoint = try #require(try storedResumeData(in: scratch))
            #expect(checkpoint.bytesOnDisk <= written, "a checkpoint never claims more than is in the file")
            let before = server.requests.count
            let continued = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-c", "-o", output.path, url]
            )
            #expect(continued.status == 0, "\(continued.stderrText)")
            #expect((try? Data(contentsOf: output)) == TestContent.data(size: size, seed: 21))
            let range = try #require(
                server.requests[before...].first?.headers["range"],
                "the continuation asks a range"
            )
            let start = try #require(Int64(range.dropFirst("bytes=".count).prefix { $0 != "-" }))
            #expect(start == written, "continued at the \(written) bytes written, not at \(checkpoint.bytesOnDisk)")
        }
    }

    @Test func anotherBootKeepsOnlyWhatWasFlushed() async throws {
        try await withServer { server in
            let session = try makeSession()
            let cut = try await makePartial(server, session: session, size: 300_000, seed: 22, cutAfter: 150_000)
            // Within the boot the bytes written past the checkpoint count, from another not.
            try appendTheNextBytes(to: cut, size: 300_000, seed: 22)
            let json = try #require(try JSONSerialization.jsonObject(with: cut.encoded()) as? [String: Any])
            #expect(json["bootID"] as? String != nil, "resume data names the boot it was written in")
            var other = json
            other["bootID"] = "00000000-0000-0000-0000-000000000000"
            let elsewhere = try ResumeData(decoding: JSONSerialization.data(withJSONObject: other))
            let (events, task, output) = try await resume(
                elsewhere,
                at: "/bytes/300000?seed=22",
                server: server,
                session: session
            )
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(offsets(events) == [cut.bytesOnDisk], "another boot: only the flushed bytes count")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 300_000, seed: 22))
        }
    }

    @Test func theSameBootKeepsWhatWasWritten() async throws {
        try await withServer { server in
            let session = try makeSession()
            let cut = try await makePartial(server, session: session, size: 300_000, seed: 23, cutAfter: 150_000)
            try appendTheNextBytes(to: cut, size: 300_000, seed: 23)
            let (events, task, output) = try await resume(
                cut,
                at: "/bytes/300000?seed=23",
                server: server,
                session: session
            )
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(offsets(events) == [cut.bytesOnDisk + 50_000])
            #expect(server.requests.last?.headers["range"] == "bytes=\(cut.bytesOnDisk + 50_000)-")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 300_000, seed: 23))
        }
    }

    /// The same against nginx, paced by its `limit_rate`; its log says where the
    /// continuation's range starts.
    @Test(.enabled(if: Nginx.enabled)) func againstNginxTheContinuationStartsWhereTheKilledProcessStopped()
        async throws
    {
        let root = try makeTemporaryDirectory("killed-nginx")
        try await makeRandomFile(root.appendingPathComponent("big.bin"), mebibytes: 24)
        let log = root.appendingPathComponent("ranges.log")
        let nginx = try await Nginx(
            serving: root,
            server: "location /slow/ { alias \(root.path)/; limit_rate 6m; access_log \(log.path) protocols; }"
        )
        defer { nginx.stop() }
        let scratch = try makeTemporaryDirectory("killed-nginx-out")
        let output = scratch.appendingPathComponent("out.bin")
        let url = "http://127.0.0.1:\(nginx.port)/slow/big.bin"
        let written = try await killed(url, output: output, atLeast: 6_000_000)
        let continued = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q", "-c", "-o", output.path, url])
        #expect(continued.status == 0, "\(continued.stderrText)")
        #expect(try await sha256(of: output) == (try await sha256(of: root.appendingPathComponent("big.bin"))))
        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        let resumed = try #require(lines.last, "nginx logged the continuation")
        #expect(resumed.contains(" 206 bytes=\(written)-"), "\(resumed)")
    }
}
