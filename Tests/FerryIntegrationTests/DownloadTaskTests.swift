import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Download tasks")
struct DownloadTaskTests {
    @Test func downloadLandsCompleteAtTheDestination() async throws {
        try await withServer { server in
            let session = try makeSession()
            let directory = try makeTemporaryDirectory()
            let target = directory.appendingPathComponent("nested/dir/file.bin")
            let task = session.downloadTask(with: server.url("/bytes/5000000?seed=9"), to: .file(target))
            let events = task.events
            task.resume()
            let names = await collectEvents(events)
            #expect(task.state == .completed)
            #expect(task.error == nil)
            #expect(task.fileURL == target)
            #expect(try await sha256(of: target) == TestContent.sha256(size: 5_000_000, seed: 9))
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
            // Order: resumed, response, progress..., finished, moved, completed (once, last).
            let order = names.map(\.name)
            #expect(order.first == "resumed")
            #expect(order.last == "completed")
            #expect(order.filter { $0 == "completed" }.count == 1)
            let response = try #require(order.firstIndex(of: "response"))
            let finished = try #require(order.firstIndex(of: "finishedDownloading"))
            let moved = try #require(order.firstIndex(of: "movedDownload"))
            #expect(response < finished && finished < moved)
            #expect(order[response..<finished].allSatisfy { $0 == "wroteData" || $0 == "response" })
            expectExactProgress(
                names.compactMap { if case .wroteData(let a, let b, let c) = $0 { (a, b, c) } else { nil } },
                endsAt: 5_000_000
            )
            #expect(task.downloadProgress == TransferProgress(completedBytes: 5_000_000, totalBytes: 5_000_000))
        }
    }

    /// Partial files in memory (`TMPDIR` on tmpfs) are never flushed: the body lands whole
    /// beside them (a rename) and on a disk (copied, and the copy flushed), and no partial is
    /// left behind.
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/shm")))
    func partialsInMemoryLandWholeInMemoryAndOnADisk() async throws {
        let memory = URL(fileURLWithPath: "/dev/shm/ferry-test-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: memory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: memory) }
        try await withServer { server in
            let partials = memory.appendingPathComponent("partials")
            let session = try makeSession { $0.downloadsDirectory = partials }
            let targets = [
                memory.appendingPathComponent("in-memory.bin"),
                try makeTemporaryDirectory().appendingPathComponent("on-disk.bin"),
            ]
            for (seed, target) in targets.enumerated() {
                let (url, _) = try await session.download(
                    from: server.url("/bytes/3000000?seed=\(seed)"),
                    to: .file(target)
                )
                #expect(url == target)
                #expect(try await sha256(of: target) == TestContent.sha256(size: 3_000_000, seed: UInt64(seed)))
            }
            #expect(files(in: partials).isEmpty)
        }
    }

    @Test func errorStatusNeverReachesTheDestination() async throws {
        try await withServer { server in
            let session = try makeSession()
            let directory = try makeTemporaryDirectory()
            let absent = directory.appendingPathComponent("absent.bin")
            let existing = directory.appendingPathComponent("existing.bin")
            try Data("keep me".utf8).write(to: existing)
            for target in [absent, existing] {
                do {
                    _ = try await session.download(from: server.url("/status/404"), to: .file(target))
                    Issue.record("a 404 download succeeded")
                } catch let error as FerryError {
                    #expect(error.reason == .unacceptableStatusCode(404))
                    #expect(error.response?.statusCode == 404)
                    #expect(error.responseBodyPrefix == Data("status 404\n".utf8))
                }
            }
            #expect(!FileManager.default.fileExists(atPath: absent.path))
            #expect(try Data(contentsOf: existing) == Data("keep me".utf8))
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
        }
    }

    @Test(arguments: ["close-after=70000", "lie-length=200000"])
    func truncatedBodiesFailWithResumeDataNeverSuccess(fault: String) async throws {
        try await withServer { server in
            let session = try makeSession { $0.retryPolicy = .none }
            let directory = try makeTemporaryDirectory()
            let target = directory.appendingPathComponent("out.bin")
            do {
                _ = try await session.download(from: server.url("/bytes/100000?\(fault)"), to: .file(target))
                Issue.record("a truncated body was delivered")
            } catch let error as FerryError {
                #expect(error.reason == .badServerResponse || error.reason == .network)
                let resumeData = try #require(error.resumeData)
                #expect(resumeData.bytesOnDisk > 0 && resumeData.bytesOnDisk <= 100_000)
                #expect(FileManager.default.fileExists(atPath: resumeData.partialFile.path))
            }
            #expect(!FileManager.default.fileExists(atPath: target.path))
        }
    }

    @Test func hostileServerNameStaysInsideTheDirectory() async throws {
        try await withServer { server in
            let session = try makeSession()
            let root = try makeTemporaryDirectory()
            let directory = root.appendingPathComponent("D/E")
            let (file, _) = try await session.download(
                from: server.url("/bytes/10?filename=../../x"),
                to: .directory(directory)
            )
            #expect(file == directory.appendingPathComponent("x"))
            #expect(files(in: directory) == ["x"])
            #expect(files(in: root) == ["D"])
        }
    }

    @Test func existingFileIsKeptUnlessReplacing() async throws {
        try await withServer { server in
            let session = try makeSession()
            let directory = try makeTemporaryDirectory()
            let target = directory.appendingPathComponent("f.bin")
            try Data("old".utf8).write(to: target)
            let task = session.downloadTask(with: server.url("/bytes/1000"), to: .file(target, options: []))
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(task.error?.reason == .destinationExists)
            #expect(seen.contains { $0.name == "failedToMoveDownload" })
            #expect(try Data(contentsOf: target) == Data("old".utf8))
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
            let (replaced, _) = try await session.download(from: server.url("/bytes/1000"), to: .file(target))
            #expect(try Data(contentsOf: replaced) == TestContent.data(size: 1000))
        }
    }

    @Test func asyncDownloadHandsTheFileOver() async throws {
        try await withServer { server in
            let session = try makeSession()
            let (file, response) = try await session.download(from: server.url("/bytes/4096?chunked=1"))
            #expect(response.expectedContentLength == nil)
            #expect(try Data(contentsOf: file) == TestContent.data(size: 4096))
            try FileManager.default.removeItem(at: file)
        }
    }
}

@Suite("Delivered file mode")
struct DeliveredFileModeTests {
    @Test func destinationFollowsTheUmaskNotThePartialMode() async throws {
        try await withServer { server in
            let session = try makeSession()
            let target = try makeTemporaryDirectory().appendingPathComponent("mode.bin")
            _ = try await session.download(from: server.url("/bytes/10"), to: .file(target))
            let mode = try #require(
                try FileManager.default.attributesOfItem(atPath: target.path)[.posixPermissions] as? Int
            )
            #expect(mode & 0o044 != 0 || umaskIsStrict, "mode \(String(mode, radix: 8))")
            #expect(mode & 0o111 == 0)
        }
    }

    /// True when the process's umask removes group and other read permission anyway.
    var umaskIsStrict: Bool {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        return status.contains("Umask:\t0077")
    }
}
