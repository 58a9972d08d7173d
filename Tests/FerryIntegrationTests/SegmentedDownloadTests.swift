import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `segments` events a task published.
private func segmentEvents(_ events: [TaskEvent]) -> [(Int, String?)] {
    events.compactMap { if case .segments(let count, let reason) = $0 { (count, reason) } else { nil } }
}

@Suite("Segmented downloads (several connections)", .serialized)
struct SegmentedDownloadTests {
    private func splitting(_ connections: Int, minimum: Int64 = 1 << 20) throws -> Session {
        try makeSession {
            $0.maximumConnectionsPerDownload = connections
            $0.minimumSegmentSize = minimum
        }
    }

    @Test func segmentsReassembleByteIdenticalOverSeveralConnections() async throws {
        try await withServer { server in
            let session = try splitting(4)
            let output = try makeTemporaryDirectory("segments").appendingPathComponent("out.bin")
            let size: Int64 = 24_000_000
            let task = session.downloadTask(with: server.url("/bytes/\(size)?seed=11"), to: .file(output))
            let seen = await resumeCollectingEvents(task)
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(segmentEvents(seen).first?.0 == 4)
            #expect(try Data(contentsOf: output) == TestContent.data(size: size, seed: 11))
            #expect(task.countOfBytesReceived == size, "every byte counted once")
            // Three ranged requests beside the first, each with the first response's validator.
            let ranged = server.requests(to: "/bytes/\(size)").filter { $0.headers["range"] != nil }
            #expect(ranged.count >= 3)
            #expect(ranged.allSatisfy { $0.headers["if-range"] == "\"16e3600-b\"" })
            #expect(server.connectionStats.peak >= 2)
        }
    }

    /// The file changes while segments wait for a connection: the next segment's `If-Range`
    /// fails, and the download starts over with the new version; never a mix of the two.
    @Test func aVersionChangeRestartsWithTheNewVersionNeverAMix() async throws {
        try await withServer { server in
            let size: Int64 = 8_000_000
            server.setVersion("doc", size: size, seed: 1)
            let session = try makeSession {
                $0.maximumConnectionsPerDownload = 4
                $0.minimumSegmentSize = 1 << 20
                $0.httpMaximumConnectionsPerHost = 2  // two segments wait for a connection
            }
            let output = try makeTemporaryDirectory("segments-change").appendingPathComponent("out.bin")
            let task = session.downloadTask(
                with: server.url("/versioned/doc?drip=65536&interval=10"),
                to: .file(output)
            )
            let events = task.events
            task.resume()
            var seen: [TaskEvent] = []
            var changed = false
            for await event in events {
                seen.append(event)
                if !changed, case .wroteData = event {
                    server.setVersion("doc", size: size, seed: 2)
                    changed = true
                }
            }
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(try Data(contentsOf: output) == TestContent.data(size: size, seed: 2))
            #expect(seen.contains { if case .resumedAtOffset(0, _) = $0 { true } else { false } }, "it started over")
        }
    }

    @Test func withoutAStrongValidatorOrRangesItTakesOneConnectionAndSaysWhy() async throws {
        try await withServer { server in
            let session = try splitting(4)
            let directory = try makeTemporaryDirectory("segments-one")
            for (query, why) in [
                ("etag=none&lastmod=none", "strong validator"),
                ("etag=weak&lastmod=recent", "strong validator"),
                ("chunked=1", "length"),
            ] {
                let task = session.downloadTask(
                    with: server.url("/bytes/6000000?seed=3&\(query)"),
                    to: .file(directory.appendingPathComponent("one.bin"))
                )
                let seen = await resumeCollectingEvents(task)
                #expect(task.error == nil)
                let segments = segmentEvents(seen)
                #expect(segments.count == 1 && segments[0].0 == 1, "\(query)")
                #expect(segments.first?.1?.contains(why) == true, "\(query): \(String(describing: segments.first?.1))")
                #expect(
                    try Data(contentsOf: directory.appendingPathComponent("one.bin"))
                        == TestContent.data(size: 6_000_000, seed: 3)
                )
            }
            // A server that answers a range with the whole file: the segments are dropped and
            // the download finishes over one connection.
            let ignoring = session.downloadTask(
                with: server.url("/bytes/6000000?seed=4&ignore-range=1"),
                to: .file(directory.appendingPathComponent("ignored.bin"))
            )
            let seen = await resumeCollectingEvents(ignoring)
            #expect(ignoring.error == nil, "\(String(describing: ignoring.error))")
            #expect(segmentEvents(seen).last?.1?.contains("whole file") == true)
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("ignored.bin"))
                    == TestContent.data(size: 6_000_000, seed: 4)
            )
        }
    }

    /// Connections that break are retried by continuing each segment where it stopped:
    /// no segment starts over, and the file is whole.
    @Test func brokenConnectionsContinueTheirSegments() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.maximumConnectionsPerDownload = 4
                $0.minimumSegmentSize = 1 << 20
                $0.retryPolicy = RetryPolicy(maximumRetries: 20, baseDelay: 0.01, maximumDelay: 0.05)
            }
            let output = try makeTemporaryDirectory("segments-broken").appendingPathComponent("out.bin")
            let size: Int64 = 12_000_000
            // Every response stops after 1.5 MB: each 3 MB segment needs a second request.
            let task = session.downloadTask(
                with: server.url("/bytes/\(size)?seed=13&close-after=1500000"),
                to: .file(output)
            )
            let seen = await resumeCollectingEvents(task)
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(seen.contains { if case .willRetry = $0 { true } else { false } })
            #expect(
                !seen.contains { if case .resumedAtOffset(0, _) = $0 { true } else { false } },
                "never started over"
            )
            let got = try Data(contentsOf: output)
            let want = TestContent.data(size: size, seed: 13)
            if got != want {
                let first = zip(got, want).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                let last = zip(got, want).enumerated().reversed().first { $0.element.0 != $0.element.1 }?.offset
                Issue.record(
                    "size \(got.count), first difference at \(String(describing: first)), last at \(String(describing: last)); requests: \(server.requests.map { $0.headers["range"] ?? "-" })"
                )
            }
        }
    }

    @Test func aChecksumIsVerifiedOnTheReassembledFile() async throws {
        try await withServer { server in
            let session = try splitting(3)
            let directory = try makeTemporaryDirectory("segments-sum")
            let size: Int64 = 9_000_000
            let good = session.downloadTask(
                with: server.url("/bytes/\(size)?seed=5"),
                to: .file(directory.appendingPathComponent("ok.bin"))
            )
            good.checksum = try Checksum(parsing: "sha256=\(TestContent.sha256(size: size, seed: 5))")
            good.resume()
            #expect(await completion(of: good) == nil)
            let bad = session.downloadTask(
                with: server.url("/bytes/\(size)?seed=6"),
                to: .file(directory.appendingPathComponent("no.bin"))
            )
            bad.checksum = try Checksum(parsing: "sha256=\(TestContent.sha256(size: size, seed: 5))")
            bad.resume()
            #expect(await completion(of: bad)?.reason == .checksumMismatch)
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("no.bin").path))
        }
    }
}

@Suite("ferry get -s: killed and continued", .serialized)
struct SegmentedCLITests {
    /// What `-s` chose is said: on standard error when it could not split, and as a
    /// `segments` event with --json.
    @Test func ferryGetSaysWhatItChose() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("segments-say")
            let noValidator = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "-s", "4", "--min-split-size", "1M", "-o", directory.appendingPathComponent("a").path,
                    server.url("/bytes/6000000?etag=none&lastmod=none").absoluteString,
                ]
            )
            #expect(noValidator.status == 0, "\(noValidator.stderrText)")
            #expect(noValidator.stderrText.contains("ferry: one connection: the response has no strong validator"))
            let split = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "--json", "-s", "3", "--min-split-size", "1M", "-o",
                    directory.appendingPathComponent("b").path,
                    server.url("/bytes/6000000?seed=2").absoluteString,
                ]
            )
            #expect(split.status == 0, "\(split.stderrText)")
            #expect(split.stdoutText.contains(#""event":"segments""#) && split.stdoutText.contains(#""count":3"#))
            #expect(
                try Data(contentsOf: directory.appendingPathComponent("b"))
                    == TestContent.data(size: 6_000_000, seed: 2)
            )
            let refused = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-s", "0", server.url("/bytes/1").absoluteString]
            )
            #expect(refused.status == 64)
        }
    }

    /// `kill -9` during `ferry get -s 4`, then `-c`: each segment continues where the last
    /// checkpoint left it, so at most one checkpoint interval per segment is fetched twice.
    @Test func killDashNineThenContinueEverySegment() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("segments-kill")
            let output = scratch.appendingPathComponent("out.bin")
            let size: Int64 = 8_000_000
            // 4 segments of 2 MB at about 650 KB/s each: a few seconds if left alone.
            let url = server.url("/bytes/\(size)?seed=12&drip=32768&interval=50").absoluteString
            let pid = try ProcessRunner.spawn(
                ProcessRunner.ferry,
                ["get", "-s", "4", "--min-split-size", "1M", "-o", output.path, url],
                stdout: scratch.appendingPathComponent("stdout").path,
                stderr: scratch.appendingPathComponent("stderr").path
            )
            // Wait for a checkpoint that records segments with bytes in them, then kill.
            var recorded: ResumeData?
            for _ in 0..<3000 {
                if let data = try? storedResumeData(in: scratch), let segments = data.segments,
                    segments.filter({ $0.next > $0.start }).count >= 2
                {
                    recorded = data
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            _ = try #require(recorded, "no checkpoint with segments")
            // What the last checkpoint before the kill recorded.
            let checkpoint = try #require(try storedResumeData(in: scratch))
            let before = server.requests.count
            let continued = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-c", "-s", "4", "--min-split-size", "1M", "-o", output.path, url]
            )
            #expect(continued.status == 0, "\(continued.stderrText)")
            #expect((try? Data(contentsOf: output)) == TestContent.data(size: size, seed: 12))
            // Every request of the continuation is a range; each unfinished segment is
            // continued exactly where the checkpoint left it, and no range starts before what a
            // checkpoint recorded: what is fetched twice is at most what each segment wrote
            // after its last checkpoint.
            let segments = try #require(checkpoint.segments)
            var starts: Set<Int64> = []
            for request in server.requests[before...] {
                let range = try #require(request.headers["range"], "a continuation asks for ranges only")
                let first = try #require(Int64(range.dropFirst("bytes=".count).prefix { $0 != "-" }))
                starts.insert(first)
                if let segment = segments.first(where: { $0.start <= first && first < $0.end }) {
                    #expect(first >= segment.next, "byte \(first) was already recorded on disk")
                }
            }
            for segment in segments where segment.next < segment.end {
                #expect(starts.contains(segment.next), "segment \(segment.start) not continued at \(segment.next)")
            }
        }
    }
}

@Suite("Segmented downloads against nginx", .serialized, .enabled(if: Nginx.enabled))
struct SegmentedNginxTests {
    /// `ferry get -s 4` beside `aria2c -x4 -s4` on the same file: the same bytes, and
    /// nginx's log shows the ranges each asked for.
    @Test func ferryGetDashSBesideAria2() async throws {
        let root = try makeTemporaryDirectory("segments-nginx")
        defer { try? FileManager.default.removeItem(at: root) }
        try await makeRandomFile(root.appendingPathComponent("big.bin"), mebibytes: 64)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/big.bin"
        let output = root.appendingPathComponent("ferry.bin")
        let ferry = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-q", "-s", "4", "--min-split-size", "4M", "-o", output.path, url]
        )
        #expect(ferry.status == 0, "\(ferry.stderrText)")
        let expected = try await sha256(of: root.appendingPathComponent("big.bin"))
        #expect(try await sha256(of: output) == expected)
        let log = try String(contentsOf: nginx.accessLog, encoding: .utf8).split(separator: "\n")
        #expect(log.filter { $0.hasPrefix("GET /big.bin 206") }.count >= 3, "\(log)")
        if let aria2 = ["/usr/bin/aria2c"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            let peer = try await ProcessRunner.run(
                aria2,
                ["-q", "-x4", "-s4", "-k4M", "--allow-overwrite=true", "-d", root.path, "-o", "aria2.bin", url]
            )
            #expect(peer.status == 0, "\(peer.stderrText)")
            #expect(try await sha256(of: root.appendingPathComponent("aria2.bin")) == expected)
        }
    }

    /// The file is replaced on nginx while segments wait for a connection: nginx's ETag
    /// changes, the next segment's `If-Range` fails, and the download starts over; the
    /// result is the new file, never a mix.
    @Test func aFileReplacedOnNginxRestartsTheDownload() async throws {
        let root = try makeTemporaryDirectory("segments-nginx-change")
        defer { try? FileManager.default.removeItem(at: root) }
        let served = root.appendingPathComponent("doc.bin")
        try await makeRandomFile(served, mebibytes: 16)
        let replacement = root.appendingPathComponent("next.tmp")
        try await makeRandomFile(replacement, mebibytes: 16)
        let expected = try await sha256(of: replacement)
        let nginx = try await Nginx(serving: root, server: "location / { limit_rate 4m; }")
        defer { nginx.stop() }
        let session = try makeSession {
            $0.maximumConnectionsPerDownload = 4
            $0.minimumSegmentSize = 2 << 20
            $0.httpMaximumConnectionsPerHost = 2
        }
        let output = root.appendingPathComponent("out.bin")
        let task = session.downloadTask(with: URL(string: "http://127.0.0.1:\(nginx.port)/doc.bin")!, to: .file(output))
        let events = task.events
        task.resume()
        var replaced = false
        var restarted = false
        for await event in events {
            if replaced, case .resumedAtOffset(0, _) = event { restarted = true }
            if !replaced, case .wroteData = event {
                // Another modification time: nginx's ETag and Last-Modified change.
                let later = Date().addingTimeInterval(60)
                try FileManager.default.setAttributes([.modificationDate: later], ofItemAtPath: replacement.path)
                #expect(rename(replacement.path, served.path) == 0)
                replaced = true
            }
        }
        #expect(await completion(of: task) == nil)
        #expect(restarted, "the download started over with the new file")
        #expect(try await sha256(of: output) == expected)
    }
}

@Suite("ferry add -s: the daemon's segmented downloads", .serialized)
struct SegmentedDaemonTests {
    @Test func theDaemonSplitsADownloadAcrossConnections() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            let size: Int64 = 48_000_000
            let output = daemon.directory.appendingPathComponent("out/split.bin")
            let id = try await daemon.add([
                server.url("/bytes/\(size)?seed=14").absoluteString, "-o", output.path, "-s", "4",
            ])
            let wait = try await daemon.ferry(["wait", "-q", "\(id)"])
            #expect(wait.status == 0, "\(wait.stderrText)")
            #expect(try Data(contentsOf: output) == TestContent.data(size: size, seed: 14))
            let ranged = server.requests(to: "/bytes/\(size)").filter { $0.headers["range"] != nil }
            // 48 MB in segments of at least 20 MiB: two, the second asked for with a range.
            #expect(!ranged.isEmpty, "the daemon asked for a segment with a range")
            #expect(ranged.allSatisfy { $0.headers["if-range"] != nil })
            #expect(try await daemon.client.task(id).connections == 4)
            let refused = try await daemon.ferry([
                "add", server.url("/bytes/10").absoluteString, "-o", output.path, "-s", "0",
            ])
            #expect(refused.status != 0)
        }
    }
}
