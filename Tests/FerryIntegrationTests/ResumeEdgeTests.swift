import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Resume: write errors, shared destinations, checksums")
struct ResumeEdgeTests {

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
    func case15_writeErrorFailsClearlyAndKeepsTheFlushedBytes() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("efbig")
            let output = scratch.appendingPathComponent("out.bin")
            let url = server.url("/bytes/1000000?seed=11").absoluteString
            // The process may not write past 300,000 bytes in any file: like a full disk.
            let limited = try await ProcessRunner.run(
                "/usr/bin/prlimit",
                ["--fsize=300000", "--", ProcessRunner.ferry, "get", "--retries", "0", "-o", output.path, url]
            )
            #expect(limited.status == 23, "\(limited.stderrText)")
            #expect(limited.stderrText.contains("Cannot write"))
            #expect(!FileManager.default.fileExists(atPath: output.path))
            let kept = try #require(try storedResumeData(in: scratch))
            #expect(kept.bytesOnDisk > 0 && kept.bytesOnDisk <= 300_000)
            let continued = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-c", "-o", output.path, url])
            #expect(continued.status == 0, "\(continued.stderrText)")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 1_000_000, seed: 11))
        }
    }

    @Test func case16_twoTasksWritingOneDestination() async throws {
        try await withServer { server in
            let session = try makeSession()
            let target = try makeTemporaryDirectory().appendingPathComponent("shared.bin")
            let first = session.downloadTask(
                with: server.url("/bytes/2000000?seed=1&drip=20000&interval=50"),
                to: .file(target)
            )
            let firstEvents = first.events
            first.resume()
            var iterator = firstEvents.makeAsyncIterator()
            while let event = await iterator.next() { if case .response = event { break } }
            // Suspended (its 2 MB drip for 5 s), the first still holds the destination, however
            // slowly this machine runs the second (with 100 kB it finished first under load).
            first.suspend()
            await #expect {
                try await session.download(from: server.url("/bytes/100000?seed=2"), to: .file(target))
            } throws: { error in
                (error as? FerryError)?.reason == .destinationInUse
            }
            first.resume()
            while await iterator.next() != nil {}
            #expect(first.error == nil)
            #expect(try Data(contentsOf: target) == TestContent.data(size: 2_000_000, seed: 1))
            // Released: the destination can be downloaded again, and no lock file is left.
            _ = try await session.download(from: server.url("/bytes/10"), to: .file(target))
            #expect(files(in: target.deletingLastPathComponent()) == ["shared.bin"])
        }
    }

    @Test func case16_twoProcessesWritingOneDestination() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("two")
            let output = scratch.appendingPathComponent("out.bin")
            let slow = try ProcessRunner.spawn(
                ProcessRunner.ferry,
                // The server holds the body back after 1,000 bytes until the client leaves, so
                // the first download holds the destination for as long as the test needs.
                ["get", "-o", output.path, server.url("/bytes/200000?stall-at=1000").absoluteString],
                stdout: scratch.appendingPathComponent("slow.out").path,
                stderr: scratch.appendingPathComponent("slow.err").path
            )
            defer { ProcessRunner.stop(slow) }
            for _ in 0..<3000 where !files(in: scratch).contains(where: { $0.hasSuffix(".ferry-lock") }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            let second = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-o", output.path, server.url("/bytes/10").absoluteString]
            )
            #expect(second.status == 23)
            #expect(second.stderrText.contains("being downloaded by another"))
        }
    }

    @Test func case17_checksumIsVerifiedAlsoAfterResumes() async throws {
        try await withServer { server in
            let session = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 20, baseDelay: 0.01) }
            let directory = try makeTemporaryDirectory()
            let good = directory.appendingPathComponent("good.bin")
            // Cut twice and resumed, then verified.
            let task = session.downloadTask(
                with: server.url("/bytes/300000?seed=12&close-after=120000"),
                to: .file(good)
            )
            task.checksum = try Checksum(.sha256, hex: TestContent.sha256(size: 300_000, seed: 12))
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(task.error == nil)
            #expect(seen.contains { $0.name == "willRetry" })
            #expect(try Data(contentsOf: good) == TestContent.data(size: 300_000, seed: 12))

            let bad = directory.appendingPathComponent("bad.bin")
            let wrong = session.downloadTask(with: server.url("/bytes/300000?seed=13"), to: .file(bad))
            wrong.checksum = try Checksum(.sha256, hex: TestContent.sha256(size: 300_000, seed: 12))
            let wrongEvents = wrong.events
            wrong.resume()
            _ = await collectEvents(wrongEvents)
            #expect(wrong.error?.reason == .checksumMismatch)
            #expect(wrong.error?.resumeData == nil)
            #expect(!FileManager.default.fileExists(atPath: bad.path))
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
        }
    }

    @Test func case5_aChecksumMakesAWeakValidatorResumable() async throws {
        try await withServer { server in
            let session = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 20, baseDelay: 0.01) }
            let target = try makeTemporaryDirectory().appendingPathComponent("weak.bin")
            let task = session.downloadTask(
                with: server.url("/bytes/200000?seed=14&etag=weak&close-after=120000"),
                to: .file(target)
            )
            task.checksum = try Checksum(parsing: "sha256=" + TestContent.sha256(size: 200_000, seed: 14))
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            #expect(task.error == nil)
            let ranged = server.requests.filter { $0.headers["range"] != nil }
            #expect(!ranged.isEmpty)
            #expect(ranged.allSatisfy { $0.headers["if-range"] == nil })
            #expect(try Data(contentsOf: target) == TestContent.data(size: 200_000, seed: 14))
        }
    }

    @Test func checksumParsing() throws {
        #expect(
            try Checksum(parsing: "SHA256=" + String(repeating: "A", count: 64)).hex
                == String(repeating: "a", count: 64)
        )
        for bad in ["sha256=abc", "crc32=00", "sha256", "md5=" + String(repeating: "z", count: 32)] {
            #expect(throws: FerryError.self) { try Checksum(parsing: bad) }
        }
    }

    @Test func cliChecksumMismatchExits9() async throws {
        try await withServer { server in
            let output = try makeTemporaryDirectory("sum").appendingPathComponent("s.bin")
            let url = server.url("/bytes/5000").absoluteString
            let ok = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--checksum", "sha256=" + TestContent.sha256(size: 5000), "-o", output.path, url]
            )
            #expect(ok.status == 0)
            try FileManager.default.removeItem(at: output)
            let mismatch = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--checksum", "sha256=" + String(repeating: "0", count: 64), "-o", output.path, url]
            )
            #expect(mismatch.status == 9)
            #expect(!FileManager.default.fileExists(atPath: output.path))
            let invalid = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--checksum", "sha256=xyz", "-o", output.path, url]
            )
            #expect(invalid.status == 64)
        }
    }
}
