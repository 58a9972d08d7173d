import Ferry
import FerryTestServer
import Foundation
import Testing

/// `ferry get URL… -O`, `-Z`, and `-i FILE` in aria2c's format, beside curl 7.88 and aria2c
/// 1.36 (Debian's) on the same URLs and the same input file.
@Suite("Several downloads in one command")
struct SeveralDownloadsTests {
    static let curl = "/usr/bin/curl"
    static let aria2c = "/usr/bin/aria2c"
    static var curlInstalled: Bool { FileManager.default.isExecutableFile(atPath: curl) }
    /// aria2c is installed, or CI requires it (then a missing one fails).
    static var aria2cInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: aria2c)
            || ProcessInfo.processInfo.environment["FERRY_REQUIRE_ARIA2"] == "1"
    }

    /// The regular files under `directory` (relative paths) and their bytes.
    func contents(of directory: URL) throws -> [String: Data] {
        var found: [String: Data] = [:]
        let walker = FileManager.default.enumerator(atPath: directory.path)
        while let path = walker?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = directory.appendingPathComponent(path)
            if FileManager.default.fileExists(atPath: full.path, isDirectory: &isDirectory), !isDirectory.boolValue {
                found[path] = try Data(contentsOf: full)
            }
        }
        return found
    }

    func runFerry(_ arguments: [String], in directory: URL) async throws -> ProcessResult {
        try await ProcessRunner.run(
            "/bin/sh",
            ["-c", "cd '\(directory.path)' && exec '\(ProcessRunner.ferry)' \"$@\"", "sh"] + arguments
        )
    }

    func tool(_ path: String, _ arguments: [String], in directory: URL) async throws -> ProcessResult {
        try await ProcessRunner.run(
            "/bin/sh",
            ["-c", "cd '\(directory.path)' && exec '\(path)' \"$@\"", "sh"] + arguments
        )
    }

    @Test(.enabled(if: curlInstalled))
    func severalURLsEachToItsOwnFileAsCurlRemoteNameAll() async throws {
        try await withServer { server in
            let ours = try makeTemporaryDirectory("several-ferry")
            let theirs = try makeTemporaryDirectory("several-curl")
            let urls = [
                server.url("/bytes/1000/a.bin?seed=1").absoluteString,
                server.url("/status/404").absoluteString,
                server.url("/bytes/2000/b.bin?seed=2").absoluteString,
            ]
            let ferry = try await runFerry(["get", "-q", "-O"] + urls, in: ours)
            let curl = try await tool(Self.curl, ["-s", "-f", "--remote-name-all"] + urls, in: theirs)
            // The failure in the middle does not stop the others; as curl, the status is the
            // last download's (the failure is said on standard error)…
            #expect(ferry.status == 0 && curl.status == 0)
            let files = try contents(of: ours)
            #expect(files == (try contents(of: theirs)))
            #expect(
                files == [
                    "a.bin": TestContent.data(size: 1000, seed: 1), "b.bin": TestContent.data(size: 2000, seed: 2),
                ]
            )
            #expect(ferry.stderrText.contains("404"))
            // … and the failure's when it is the last, or with -Z, whatever came after it.
            let last = try await runFerry(["get", "-q", "-O", urls[0], urls[1]], in: ours)
            let curlLast = try await tool(Self.curl, ["-s", "-f", "--remote-name-all", urls[0], urls[1]], in: theirs)
            #expect(last.status == 22 && curlLast.status == 22)
            let parallel = try await runFerry(["get", "-q", "-Z", "--clobber", "-O"] + urls, in: ours)
            let curlParallel = try await tool(Self.curl, ["-s", "-f", "-Z", "--remote-name-all"] + urls, in: theirs)
            #expect(parallel.status == 22 && curlParallel.status == 22)

            // One URL per name: -o cannot name several files.
            let refused = try await runFerry(["get", "-o", "x", urls[0], urls[2]], in: ours)
            #expect(refused.status == 64, "a usage error")
        }
    }

    @Test(.enabled(if: curlInstalled))
    func parallelDownloadsOverlapAndGiveTheSameFiles() async throws {
        try await withServer { server in
            let ours = try makeTemporaryDirectory("parallel-ferry")
            let theirs = try makeTemporaryDirectory("parallel-curl")
            // Each body drips for a while, so that downloads run at once overlap.
            let urls = (1...4).map {
                server.url("/bytes/20480/p\($0).bin?seed=\($0)&drip=1024&interval=40").absoluteString
            }
            let ferry = try await runFerry(["get", "-q", "-Z", "--parallel-max", "4", "-O"] + urls, in: ours)
            #expect(ferry.status == 0, "\(ferry.stderrText)")
            let stats = try await Session.shared.data(from: server.url("/stats")).0
            let peak = try #require(try JSONSerialization.jsonObject(with: stats) as? [String: Int])["peak"] ?? 0
            #expect(peak >= 2, "the downloads ran at once (peak \(peak) connections)")
            let curl = try await tool(
                Self.curl,
                ["-s", "-Z", "--parallel-max", "4", "--remote-name-all"] + urls,
                in: theirs
            )
            #expect(curl.status == 0)
            let files = try contents(of: ours)
            #expect(files.count == 4)
            #expect(files == (try contents(of: theirs)))
        }
    }

    /// `--max-per-host 1` holds `-Z`'s downloads to one host to one at a time: each request
    /// comes after the body before it, which the server drips for at least half a second.
    @Test func theHostCapHoldsParallelDownloadsBack() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("host-cap")
            let urls = (1...3).map {
                server.url("/bytes/10240/h\($0).bin?seed=\($0)&drip=1024&interval=50").absoluteString
            }
            let result = try await runFerry(
                ["get", "-q", "-Z", "--parallel-max", "3", "--max-per-host", "1", "-O"] + urls,
                in: directory
            )
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(try contents(of: directory).count == 3)
            let arrivals = server.requests.filter { $0.uri.hasPrefix("/bytes/10240/") }.map(\.receivedAt).sorted()
            #expect(arrivals.count == 3)
            for (earlier, later) in zip(arrivals, arrivals.dropFirst()) {
                // Ten chunks 50 ms apart: the next request cannot come sooner.
                #expect(later.timeIntervalSince(earlier) >= 0.45)
            }
        }
    }

    @Test(.enabled(if: aria2cInstalled))
    func anAria2InputFileGivesWhatAria2cGivesAndNeverKeepsAWrongBody() async throws {
        try await withServer { server in
            let ours = try makeTemporaryDirectory("input-ferry")
            let theirs = try makeTemporaryDirectory("input-aria2c")
            let good = TestContent.sha256(size: 3000, seed: 3)
            let closed = "http://127.0.0.1:\(try closedPort())/c.bin"
            let list = """
                # mirrors of one file: the first refuses, the second serves it
                \(closed)\t\(server.url("/bytes/3000/c.bin?seed=3").absoluteString)
                  out=mirror.bin
                  dir=sub
                  checksum=sha-256=\(good)
                \(server.url("/bytes/500/d.bin?seed=4").absoluteString)
                  header=X-List: yes

                \(server.url("/bytes/100/e.bin?seed=5").absoluteString)
                  checksum=sha-256=\(String(repeating: "0", count: 64))

                """
            for directory in [ours, theirs] {
                try list.write(to: directory.appendingPathComponent("list.txt"), atomically: true, encoding: .utf8)
            }
            let ferry = try await runFerry(["get", "-q", "--retries", "0", "-i", "list.txt"], in: ours)
            let aria2c = try await tool(Self.aria2c, ["-q", "--max-tries=1", "-i", "list.txt"], in: theirs)
            #expect(ferry.status == 9, "the checksum that failed: \(ferry.stderrText)")
            #expect(aria2c.status != 0)
            let files = try contents(of: ours)
            let expected = [
                "list.txt": Data(list.utf8), "sub/mirror.bin": TestContent.data(size: 3000, seed: 3),
                "d.bin": TestContent.data(size: 500, seed: 4),
            ]
            #expect(files == expected, "\(files.keys.sorted())")
            let aria2cFiles = try contents(of: theirs)
            for (name, data) in expected { #expect(aria2cFiles[name] == data, "aria2c's \(name)") }
            // aria2c keeps the body whose digest is wrong (and its control file); ferry keeps
            // nothing of it.
            #expect(aria2cFiles["e.bin"] != nil && files["e.bin"] == nil)
            #expect(server.requests.contains { $0.uri.hasPrefix("/bytes/500/d.bin") && $0.headers["x-list"] == "yes" })

            // A line ferry cannot use is refused before anything is fetched, naming the line.
            try "\(server.url("/bytes/10").absoluteString)\n  max-speed=1\n".write(
                to: ours.appendingPathComponent("bad.txt"),
                atomically: true,
                encoding: .utf8
            )
            let before = server.requests.count
            let bad = try await runFerry(["get", "-i", "bad.txt"], in: ours)
            #expect(bad.status == 3)
            #expect(bad.stderrText.contains("line 2"))
            #expect(server.requests.count == before)
        }
    }

    /// `ferry add -i`: the same input file to the daemon, every entry with a `dir=` of the
    /// test's. A refused mirror gives way to the next, which continues the task; a wrong
    /// digest fails its task and keeps nothing.
    @Test func theDaemonTakesAnInputFileWithMirrorsAndChecksums() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            let folder = daemon.directory.appendingPathComponent("files", isDirectory: true)
            let closed = "http://127.0.0.1:\(try closedPort())/c.bin"
            let list = """
                \(closed)\t\(server.url("/bytes/3000/c.bin?seed=3").absoluteString)
                  out=mirror.bin
                  dir=\(folder.path)
                  checksum=sha-256=\(TestContent.sha256(size: 3000, seed: 3))
                \(server.url("/bytes/500/d.bin?seed=4").absoluteString)
                  dir=\(folder.path)
                  header=X-List: daemon
                \(server.url("/bytes/100/e.bin?seed=5").absoluteString)
                  dir=\(folder.path)
                  checksum=sha-256=\(String(repeating: "0", count: 64))
                """
            let file = daemon.directory.appendingPathComponent("list.txt")
            try list.write(to: file, atomically: true, encoding: .utf8)
            let added = try await daemon.ferry(["add", "-i", file.path])
            #expect(added.status == 0, "\(added.stderrText)")
            let ids = added.stdoutText.split(separator: "\n").compactMap { Int64($0) }
            #expect(ids.count == 3)
            var states: [BackgroundTaskRecord.State] = []
            for id in ids { states.append(try await finalState(of: id, daemon.client).state) }
            #expect(states == [.completed, .completed, .failed])
            #expect(
                try contents(of: folder) == [
                    "mirror.bin": TestContent.data(size: 3000, seed: 3), "d.bin": TestContent.data(size: 500, seed: 4),
                ]
            )
            #expect(
                server.requests.contains { $0.uri.hasPrefix("/bytes/500/d.bin") && $0.headers["x-list"] == "daemon" }
            )
            let log = try String(contentsOf: daemon.directory.appendingPathComponent("daemon.err"), encoding: .utf8)
            #expect(log.contains("continuing from the mirror"))

            // A file the daemon cannot use adds nothing.
            try "\(server.url("/bytes/1").absoluteString)\n  out=../escape\n".write(
                to: file,
                atomically: true,
                encoding: .utf8
            )
            let refused = try await daemon.ferry(["add", "-i", file.path])
            #expect(refused.status == 3)
            #expect(try await daemon.client.tasks().count == 3)
        }
    }

    /// Mirrors are alternate sources of one version: a mirror that serves the same version
    /// continues the bytes the cut one kept (Range with If-Range); one that serves another
    /// version sends the whole file, which replaces them. Never a mix.
    @Test(arguments: [true, false])
    func aMirrorContinuesOnlyTheSameVersion(sameVersion: Bool) async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("mirrors")
            // The first mirror cuts after 100,000 bytes; its ETag is that of seed 1.
            let cut = server.url("/bytes/200000/m.bin?seed=1&close-after=100000").absoluteString
            let seed: UInt64 = sameVersion ? 1 : 2
            let next = server.url("/bytes/200000/m.bin?seed=\(seed)&mirror=2").absoluteString
            try "\(cut)\t\(next)\n  out=m.bin\n".write(
                to: directory.appendingPathComponent("list.txt"),
                atomically: true,
                encoding: .utf8
            )
            let result = try await runFerry(["get", "-q", "--retries", "0", "-i", "list.txt"], in: directory)
            #expect(result.status == 0, "\(result.stderrText)")
            let file = try Data(contentsOf: directory.appendingPathComponent("m.bin"))
            #expect(file == TestContent.data(size: 200_000, seed: seed), "one version, whole")
            let asked = try #require(server.requests.first { $0.uri.contains("mirror=2") })
            // Both asked to continue from the bytes kept; only the same version did.
            #expect(asked.headers["range"] == "bytes=100000-")
            #expect(asked.headers["if-range"] == "\"30d40-1\"")
        }
    }
}

/// `ferry get -Z` of many files from one host over HTTPS shares its connections as curl's
/// `-Z` does, beside curl on the same nginx: one session for the command's jobs, not a
/// session (and a TLS handshake) per file. The connections are counted in nginx's log.
@Suite("Several downloads share their connections", .enabled(if: Nginx.enabled))
struct SharedConnectionTests {
    /// The distinct connections of the log's lines from `start` on (`$connection` ends each).
    func connections(_ origin: HTTP2Origin, from start: Int) throws -> (requests: Int, connections: Int) {
        let lines = try origin.logged().dropFirst(start)
        return (lines.count, Set(lines.compactMap { $0.split(separator: " ").last }).count)
    }

    @Test(arguments: ["ssl http2", "ssl"])
    func parallelDownloadsOverTLSOpenNoMoreConnectionsThanCurl(listen: String) async throws {
        let root = try await makeHTTP2Root("shared-connections", mebibytes: 0)
        defer { try? FileManager.default.removeItem(at: root) }
        let count = 40
        for index in 1...count {
            try TestContent.data(size: 64 << 10, seed: UInt64(index))
                .write(to: root.appendingPathComponent("f\(index).bin"))
        }
        let origin = try await HTTP2Origin(root: root, listen: listen)
        defer { origin.stop() }
        let urls = try (1...count).map { try origin.url("/f\($0).bin").absoluteString }
        let ca = ["--cacert", origin.caFile.path]
        let ours = try makeTemporaryDirectory("shared-ferry")
        let theirs = try makeTemporaryDirectory("shared-curl")
        defer {
            try? FileManager.default.removeItem(at: ours)
            try? FileManager.default.removeItem(at: theirs)
        }

        let ferry = try await ProcessRunner.run(
            "/bin/sh",
            ["-c", "cd '\(ours.path)' && exec \"$@\"", "sh", ProcessRunner.ferry, "get", "-q", "-Z"]
                + ["--parallel-max", "6", "-O"] + ca + urls
        )
        #expect(ferry.status == 0, "\(ferry.stderrText)")
        let ferryLogged = try connections(origin, from: 0)
        let curl = try await ProcessRunner.run(
            "/bin/sh",
            ["-c", "cd '\(theirs.path)' && exec \"$@\"", "sh", SeveralDownloadsTests.curl, "-sS", "-Z"]
                + ["--parallel-max", "6", "--remote-name-all"] + ca + urls
        )
        #expect(curl.status == 0, "\(curl.stderrText)")
        let curlLogged = try connections(origin, from: ferryLogged.requests)

        for index in 1...count {
            let name = "f\(index).bin"
            let expected = TestContent.data(size: 64 << 10, seed: UInt64(index))
            #expect(try Data(contentsOf: ours.appendingPathComponent(name)) == expected, "\(name)")
            #expect(try Data(contentsOf: theirs.appendingPathComponent(name)) == expected, "\(name)")
        }
        #expect(ferryLogged.requests == count && curlLogged.requests == count)
        // At most --parallel-max connections, as curl: over HTTP/1.1 one per transfer running
        // at once, over HTTP/2 the streams of one connection (another only when the server's
        // stream limit is reached: nginx allows 128).
        #expect(ferryLogged.connections <= (listen == "ssl" ? 6 : 1), "ferry: \(ferryLogged), curl: \(curlLogged)")
        #expect(ferryLogged.connections <= max(curlLogged.connections, listen == "ssl" ? 6 : 1))
    }
}
