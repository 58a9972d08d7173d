import Ferry
import FerryBackground
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The security review's findings (docs/Security.md), one test each, named by its number
/// in the review: files on disk, proxies, full disks, names a server chose, bombs.
@Suite("Security findings")
struct SecurityTests {
    let ferry = ProcessRunner.ferry
    let curl = "/usr/bin/curl"

    /// 3: the checksum and the move work from the partial file Ferry created (its
    /// descriptor, and the directory it verified), not from whatever the path names later.
    /// Here the partials directory is renamed away mid-download and a file of the same name
    /// put in its place: the download still checks and delivers its own bytes.
    @Test("13.3: a partial file swapped by path is neither checked nor delivered")
    func aPartialSwappedByPathIsNeitherCheckedNorDelivered() async throws {
        try await withServer { server in
            let partials = try makeTemporaryDirectory("swap")
            let session = try makeSession { $0.downloadsDirectory = partials }
            let output = try makeTemporaryDirectory("swap-out").appendingPathComponent("out.bin")
            let size: Int64 = 200_000
            let task = session.downloadTask(
                with: server.url("/bytes/\(size)?seed=3&drip=2000&interval=20"),
                to: .file(output)
            )
            task.checksum = try Checksum(.sha256, hex: TestContent.sha256(size: size, seed: 3))
            let events = task.events
            task.resume()
            var iterator = events.makeAsyncIterator()
            while let event = await iterator.next() {
                if case .wroteData = event { break }
            }
            task.suspend()
            let name = try #require(files(in: partials).first { $0.hasSuffix(".partial") })
            let moved = partials.deletingLastPathComponent()
                .appendingPathComponent(partials.lastPathComponent + "-moved")
            try FileManager.default.moveItem(at: partials, to: moved)
            try FileManager.default.createDirectory(at: partials, withIntermediateDirectories: false)
            try Data(repeating: 0x45, count: Int(size)).write(to: partials.appendingPathComponent(name))
            task.resume()
            while await iterator.next() != nil {}
            #expect(task.error == nil, "\(String(describing: task.error))")
            let delivered = try Data(contentsOf: output)
            #expect(delivered == TestContent.data(size: size, seed: 3))
            // The stranger's file is left where it was, untouched.
            #expect(try Data(contentsOf: partials.appendingPathComponent(name)).allSatisfy { $0 == 0x45 })
        }
    }

    /// 4: a proxy reached with `https://` would need TLS to the proxy, which Ferry does not
    /// speak; it used to send the CONNECT and `Proxy-Authorization` in clear. Now the
    /// session refuses it before any byte goes to the proxy, from the library, `-x`, and
    /// the environment alike.
    @Test("13.4: an https:// proxy is refused; its credentials never go out in clear")
    func anHTTPSProxyIsRefusedBeforeAnyByteGoesToIt() async throws {
        let proxy = try await TunnelProxy.start(.httpConnect(requiredAuthorization: nil))
        try await withServer { server in
            let address = "https://me:secret@127.0.0.1:\(proxy.port)"
            var configuration = SessionConfiguration.default
            let parsed: Proxy = try #require(Proxy(address: address))
            configuration.proxy = parsed
            let refused: FerryError? = await {
                do {
                    let session = try Session(configuration: configuration)
                    _ = try await session.data(from: server.url("/bytes/10"))
                    return nil
                } catch {
                    return error as? FerryError
                }
            }()
            #expect(refused?.reason == .unsupportedConfiguration, "\(String(describing: refused))")
            let url = server.url("/bytes/10").absoluteString
            let dashX = try await ProcessRunner.run(ferry, ["get", "-q", "-x", address, url])
            #expect(dashX.status != 0)
            #expect(dashX.stderrText.contains("https://"), "\(dashX.stderrText)")
            let fromEnvironment = try await ProcessRunner.run(
                ferry,
                ["get", "-q", url],
                environment: ["http_proxy": address, "no_proxy": ""]
            )
            #expect(fromEnvironment.status != 0)
            #expect(fromEnvironment.stdout.isEmpty)
        }
        #expect(proxy.tunnels.isEmpty, "the proxy heard: \(proxy.tunnels)")
        await proxy.shutdown()
    }

    /// 5: a disk that fills mid-download keeps the partial and its last good checkpoint
    /// (writing new metadata fails too, with no space left), so `-c` continues once there
    /// is room. The output directory is a 1 MiB tmpfs in a mount namespace of the test's own.
    @Test("13.5: a full disk keeps the last good checkpoint, and -c continues it")
    func aFullDiskKeepsTheLastGoodCheckpoint() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("full-disk")
            let disk = scratch.appendingPathComponent("disk")
            try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: false)
            let size: Int64 = 2_000_000
            // 50 kB every 100 ms: the first checkpoint (after a second) comes long before
            // the 1 MiB disk is full, however slowly this machine runs.
            let url = server.url("/bytes/\(size)?seed=5&drip=50000&interval=100").absoluteString
            let script = """
                mount -t tmpfs -o size=1m tmpfs '\(disk.path)' || exit 90
                "$FERRY" get -q --retries 0 '\(url)' -o '\(disk.path)/out.bin' 2>'\(scratch.path)/first.err'
                echo "first=$?"
                mount -o remount,size=8m '\(disk.path)' || exit 91
                "$FERRY" get -c '\(url)' -o '\(disk.path)/out.bin' 2>'\(scratch.path)/second.err'
                echo "second=$?"
                sha256sum '\(disk.path)/out.bin' | cut -d' ' -f1
                """
            let result = try await ProcessRunner.run(
                "/usr/bin/unshare",
                ["-m", "/bin/bash", "-c", script],
                environment: ["FERRY": ferry]
            )
            let lines = result.stdoutText.split(separator: "\n").map(String.init)
            let first = (try? String(contentsOf: scratch.appendingPathComponent("first.err"), encoding: .utf8)) ?? ""
            let second = (try? String(contentsOf: scratch.appendingPathComponent("second.err"), encoding: .utf8)) ?? ""
            try #require(result.status == 0, "\(result.stderrText) \(result.stdoutText)")
            #expect(lines.first != "first=0")
            #expect(first.contains("No space left on device"), "\(first)")
            #expect(first.contains("bytes kept"), "\(first)")
            #expect(lines.dropFirst().first == "second=0", "\(second)")
            #expect(second.contains("continued at byte"), "\(second)")
            #expect(lines.last == TestContent.sha256(size: size, seed: 5))
        }
    }

    /// 6: `-O` takes the name the server chose; it never replaces an existing file unless
    /// `--clobber` says so (curl `-OJ` refuses too), with nginx sending the name.
    @Test("13.6: -O never overwrites an existing file without --clobber, as curl -OJ", .enabled(if: Nginx.enabled))
    func remoteNameNeverOverwritesAnExistingFile() async throws {
        let root = try makeTemporaryDirectory("remote-name-root")
        try Data(repeating: 0x61, count: 5000).write(to: root.appendingPathComponent("f"))
        let nginx = try await Nginx(
            serving: root,
            server: #"location /f { add_header Content-Disposition 'attachment; filename="notes.txt"'; }"#
        )
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/f"
        for (tool, arguments) in [(ferry, ["get", "-q", "-O", "--dir"]), (curl, ["-s", "-OJ", "--output-dir"])] {
            let directory = try makeTemporaryDirectory("remote-name")
            let existing = directory.appendingPathComponent("notes.txt")
            try Data("mine\n".utf8).write(to: existing)
            let result = try await ProcessRunner.run(tool, arguments + [directory.path, url])
            #expect(result.status == 23, "\(tool): \(result.stderrText)")
            #expect(try Data(contentsOf: existing) == Data("mine\n".utf8), "\(tool) replaced the file")
            #expect(files(in: directory) == ["notes.txt"], "\(tool)")
        }
        let directory = try makeTemporaryDirectory("remote-name-clobber")
        try Data("mine\n".utf8).write(to: directory.appendingPathComponent("notes.txt"))
        let refused = try await ProcessRunner.run(ferry, ["get", "-O", "--dir", directory.path, url])
        #expect(refused.stderrText.contains("--clobber"), "\(refused.stderrText)")
        let clobber = try await ProcessRunner.run(
            ferry,
            ["get", "-q", "-O", "--clobber", "--dir", directory.path, url]
        )
        #expect(clobber.status == 0, "\(clobber.stderrText)")
        #expect(try Data(contentsOf: directory.appendingPathComponent("notes.txt")).count == 5000)
    }

    /// 6: two downloads of the same resume key (two `ferry get -c -O` of one URL) would
    /// continue the same partial file; the second is refused while the first runs.
    @Test("13.6: a second download of the same resume key is refused while the first runs")
    func aSecondDownloadOfTheSameResumeKeyIsRefused() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("same-key")
            let first = try makeSession {
                $0.downloadsDirectory = directory
                $0.resumeStore = ResumeStore(directory: directory)
            }
            let second = try makeSession {
                $0.downloadsDirectory = directory
                $0.resumeStore = ResumeStore(directory: directory)
            }
            let running = first.downloadTask(
                with: server.url("/bytes/100000?stall-at=50000&filename=same.bin"),
                to: .directory(directory)
            )
            running.resumeKey = "same"
            running.resumesFromStore = true
            let events = running.events
            running.resume()
            var iterator = events.makeAsyncIterator()
            while let event = await iterator.next() {
                // Some of it is on disk (the rest waits at the stall until the task ends).
                if case .wroteData = event { break }
            }
            let competing = second.downloadTask(
                with: server.url("/bytes/100000?filename=same.bin"),
                to: .directory(directory)
            )
            competing.resumeKey = "same"
            competing.resumesFromStore = true
            let competingEvents = competing.events
            competing.resume()
            for await _ in competingEvents {}
            #expect(competing.error?.reason == .destinationInUse, "\(String(describing: competing.error))")
            running.cancel()
            while await iterator.next() != nil {}
        }
    }

    /// 7: a gzip body that inflates more than 200-fold (here nginx's gzip of 20 MB of
    /// zeros) is refused while it inflates, and nothing reaches the output; curl
    /// `--compressed` writes all 20 MB. `--max-filesize` stops both tools alike (exit 63).
    @Test("13.7: --compressed caps what a body inflates to; --max-filesize as curl", .enabled(if: Nginx.enabled))
    func inflationIsCappedAndMaxFilesizeMatchesCurl() async throws {
        let root = try makeTemporaryDirectory("bomb-root")
        try Data(count: 20_000_000).write(to: root.appendingPathComponent("zeros"))
        try Data(repeating: 0x62, count: 5000).write(to: root.appendingPathComponent("plain"))
        let nginx = try await Nginx(
            serving: root,
            server: "gzip on; gzip_comp_level 9; gzip_types *; gzip_min_length 0;"
        )
        defer { nginx.stop() }
        let base = "http://127.0.0.1:\(nginx.port)"
        let scratch = try makeTemporaryDirectory("bomb")
        let bomb = scratch.appendingPathComponent("bomb.bin")
        let ours = try await ProcessRunner.run(ferry, ["get", "-q", "--compressed", base + "/zeros", "-o", bomb.path])
        #expect(ours.status == 63, "\(ours.stderrText)")
        #expect(ours.stderrText.contains("inflate"), "\(ours.stderrText)")
        #expect(files(in: scratch).isEmpty)
        let theirs = try await ProcessRunner.run(curl, ["-s", "--compressed", base + "/zeros", "-o", bomb.path])
        #expect(theirs.status == 0)
        #expect((try? FileManager.default.attributesOfItem(atPath: bomb.path)[.size] as? Int) == 20_000_000)
        try FileManager.default.removeItem(at: bomb)

        for (tool, quiet) in [(ferry, ["get", "-q"]), (curl, ["-s"])] {
            let output = scratch.appendingPathComponent("plain.bin")
            let capped = try await ProcessRunner.run(
                tool,
                quiet + ["--max-filesize", "1000", base + "/plain", "-o", output.path]
            )
            #expect(capped.status == 63, "\(tool): \(capped.stderrText)")
            #expect(files(in: scratch).isEmpty, "\(tool)")
            let enough = try await ProcessRunner.run(
                tool,
                quiet + ["--max-filesize", "5000", base + "/plain", "-o", output.path]
            )
            #expect(enough.status == 0, "\(tool): \(enough.stderrText)")
            try? FileManager.default.removeItem(at: output)
        }
        // The cap on the inflated file, too: 300 kB of text gzips to far less than 300 kB.
        try Data(repeating: 0x63, count: 300_000).write(to: root.appendingPathComponent("text"))
        let inflated = try await ProcessRunner.run(
            ferry,
            ["get", "-q", "--compressed", "--max-filesize", "100000", base + "/text", "-o", bomb.path]
        )
        #expect(inflated.status == 63, "\(inflated.stderrText)")
        #expect(files(in: scratch).isEmpty)
    }

    /// 7: with `--compressed`, `--checksum` checks the file the user gets (decoded), and a
    /// mismatch leaves nothing at the output.
    @Test("13.7: --checksum checks the decoded file that --compressed writes")
    func checksumChecksTheDecodedFile() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("decoded-sum")
            let output = scratch.appendingPathComponent("out.bin")
            let url = server.url("/gzip/300000").absoluteString
            let decoded = "sha256=" + TestContent.sha256(size: 300_000)
            let good = try await ProcessRunner.run(
                ferry,
                ["get", "-q", "--compressed", "--checksum", decoded, url, "-o", output.path]
            )
            #expect(good.status == 0, "\(good.stderrText)")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 300_000))
            try FileManager.default.removeItem(at: output)
            let wrong = "sha256=" + String(repeating: "0", count: 64)
            let bad = try await ProcessRunner.run(
                ferry,
                ["get", "-q", "--compressed", "--checksum", wrong, url, "-o", output.path]
            )
            #expect(bad.status == 9, "\(bad.stderrText)")
            #expect(files(in: scratch).isEmpty)
        }
    }

    /// 13: a credential given to `ferry add -H` reaches the server, but `ferry ls` (plain
    /// and `--json`) never prints it, and everything in the daemon's state directory (the
    /// store that keeps it) is readable by its user alone.
    @Test("13.13: secret headers of daemon tasks are never printed, and the store is 0600")
    func secretHeadersOfDaemonTasksAreNeverPrinted() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            let output = daemon.directory.appendingPathComponent("token.json")
            let id = try await daemon.add([
                server.url("/echo").absoluteString, "-H", "Authorization: Bearer TOKEN123",
                "-H", "X-Trace: visible", "-o", output.path,
            ])
            let wait = try await daemon.ferry(["wait", "-q", "\(id)"])
            #expect(wait.status == 0, "\(wait.stderrText)")
            // The server got it.
            #expect(try String(contentsOf: output, encoding: .utf8).contains("Bearer TOKEN123"))
            for arguments in [["ls", "--json"], ["ls"]] {
                let list = try await daemon.ferry(arguments)
                #expect(!list.stdoutText.contains("TOKEN123"), "\(arguments): \(list.stdoutText)")
            }
            let json = try await daemon.ferry(["ls", "--json"])
            #expect(json.stdoutText.contains("<redacted>"), "\(json.stdoutText)")
            #expect(json.stdoutText.contains("visible"), "\(json.stdoutText)")
            let walker = FileManager.default.enumerator(atPath: daemon.state.path)
            while let name = walker?.nextObject() as? String {
                let path = daemon.state.appendingPathComponent(name).path
                let attributes = try FileManager.default.attributesOfItem(atPath: path)
                guard attributes[.type] as? FileAttributeType != .typeSocket else { continue }
                let mode = (attributes[.posixPermissions] as? Int) ?? 0o777
                #expect(mode & 0o077 == 0, "\(name) is \(String(mode, radix: 8))")
            }
        }
    }

    /// 15: the side files of a download (its lock, the staging copy of a move across file
    /// systems) are named after the output but never longer than a file name may be: an
    /// output, or a name a server chose, of 255 bytes downloads like any other.
    @Test("13.15: a 255-byte output name downloads; its side files stay within NAME_MAX")
    func longestNamesDownload() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("long-name")
            let name = String(repeating: "n", count: 251) + ".bin"
            let url = server.url("/bytes/5000").absoluteString
            let named = try await ProcessRunner.run(
                ferry,
                ["get", "-q", url, "-o", scratch.appendingPathComponent(name).path]
            )
            #expect(named.status == 0, "\(named.stderrText)")
            let chosen = server.url("/bytes/5000?filename=\(String(repeating: "s", count: 300)).txt").absoluteString
            let remote = try await ProcessRunner.run(ferry, ["get", "-q", "-O", "--dir", scratch.path, chosen])
            #expect(remote.status == 0, "\(remote.stderrText)")
            let kept = files(in: scratch)
            #expect(kept.count == 2 && kept.allSatisfy { $0.utf8.count <= 255 && !$0.hasPrefix(".") }, "\(kept)")
        }
    }

    /// 9: the cache judges the request as it was sent: one that gained `Authorization` on
    /// the way (here from an interceptor) is not stored for others to read. And a
    /// redirect's target is filed under the URL that answered, not the one first asked.
    @Test("13.9: the cache stores by the request sent and the URL that answered")
    func theCacheStoresByTheRequestSentAndTheURLThatAnswered() async throws {
        try await withServer { server in
            let cache = ResponseCache()
            let authorized = try makeSession {
                $0.responseCache = cache
                $0.interceptor = AddsAuthorization()
            }
            let anonymous = try makeSession { $0.responseCache = cache }
            let guarded = URLRequest(url: server.url("/cached/private?cc=max-age%3D60"))
            _ = try await authorized.data(for: guarded)
            #expect(server.requests(to: "/cached/private").first?.headers["authorization"] == "Bearer secret")
            #expect(cache.cachedResponse(for: guarded) == nil)
            _ = try await anonymous.data(for: guarded)
            #expect(
                server.requests(to: "/cached/private").count == 2,
                "the anonymous request was served the private answer"
            )

            let target = server.url("/cached/target?cc=max-age%3D60")
            var components = URLComponents(url: server.url("/redirect-to"), resolvingAgainstBaseURL: false)!
            components.queryItems = [URLQueryItem(name: "url", value: target.absoluteString)]
            let redirecting = URLRequest(url: try #require(components.url))
            _ = try await anonymous.data(for: redirecting)
            #expect(cache.cachedResponse(for: redirecting) == nil)
            #expect(cache.cachedResponse(for: URLRequest(url: target)) != nil)
            _ = try await anonymous.data(for: URLRequest(url: target))
            #expect(server.requests(to: "/cached/target").count == 1)
        }
    }
    /// 14: a server that accepts a connection and then says nothing (no TLS handshake) is
    /// given the connect timeout, as a direct connection is: the TLS bridge (used for
    /// pinned hosts) closes its socket then, instead of holding it for ever.
    @Test("13.14: the TLS bridge's handshake obeys the request timeout")
    func theBridgesHandshakeTimesOut() async throws {
        let scratch = try makeTemporaryDirectory("stall-tls")
        let portFile = scratch.appendingPathComponent("port")
        let closedFile = scratch.appendingPathComponent("closed")
        let script = """
            import socket
            s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(4)
            open("\(portFile.path).tmp", "w").write(str(s.getsockname()[1]))
            import os; os.rename("\(portFile.path).tmp", "\(portFile.path)")
            c, _ = s.accept()
            while c.recv(65536): pass
            open("\(closedFile.path)", "w").write("closed")
            """
        let pid = try ProcessRunner.spawn(
            "/usr/bin/python3",
            ["-c", script],
            stdout: scratch.appendingPathComponent("out").path,
            stderr: scratch.appendingPathComponent("err").path
        )
        defer { ProcessRunner.stop(pid) }
        var port: Int?
        for _ in 0..<1000 where port == nil {
            port = (try? String(contentsOf: portFile, encoding: .utf8)).flatMap { Int($0) }
            if port == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        let session = try makeSession {
            $0.tls.pinnedPublicKeys["127.0.0.1"] = ["sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
            $0.timeoutIntervalForRequest = 2
            $0.retryPolicy = .none
        }
        let listening = try #require(port, "the stalling server did not start")
        let url = try #require(URL(string: "https://127.0.0.1:\(listening)/"))
        await #expect(throws: FerryError.self) { _ = try await session.data(from: url) }
        // The bridge's connection to the server is closed, not left open.
        for _ in 0..<3000 where !FileManager.default.fileExists(atPath: closedFile.path) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(FileManager.default.fileExists(atPath: closedFile.path), "the stalled connection is still open")
    }

    /// 12: the daemon's allowed directories hold when the file is moved into place, not
    /// only when the task was added: a directory that did not exist then (so nothing could
    /// be resolved) and appears as a link to elsewhere before the download ends gets
    /// nothing. "Elsewhere" is a new directory in /var/tmp, outside every directory the
    /// daemon allows (home, its state, the temporary directories).
    @Test("13.12: --allow is judged again when the file is moved into place")
    func allowedDirectoriesHoldWhenTheFileIsMoved() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            // /var/tmp: a temporary directory the daemon does not allow (it allows $HOME, its
            // state, $TMPDIR and /tmp; the build folder may lie under /tmp).
            let outside = URL(fileURLWithPath: "/var/tmp", isDirectory: true)
                .appendingPathComponent("ferry-outside-\(UUID().uuidString.prefix(8))", isDirectory: true)
            try #require(
                ![FileManager.default.homeDirectoryForCurrentUser, FileManager.default.temporaryDirectory]
                    .contains { outside.path.hasPrefix($0.resolvingSymlinksInPath().path + "/") },
                "/var/tmp lies in a directory the daemon allows here"
            )
            try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: outside) }
            let later = daemon.directory.appendingPathComponent("later", isDirectory: true)
            let url = server.url("/bytes/200000?stall-at=100000").absoluteString
            let id = try await daemon.add([url, "-o", later.appendingPathComponent("out.bin").path])
            try await daemon.waitUntil(id, received: 100_000)
            // The daemon made the directory when the download started; it becomes a link.
            try FileManager.default.removeItem(at: later)
            try FileManager.default.createSymbolicLink(at: later, withDestinationURL: outside)
            #expect(try await daemon.ferry(["pause", "\(id)"]).status == 0)
            #expect(try await daemon.ferry(["resume", "\(id)"]).status == 0)
            let wait = try await daemon.ferry(["wait", "-q", "\(id)"])
            #expect(wait.status != 0)
            let task = try await daemon.client.task(id)
            #expect(task.state == .failed)
            #expect(
                task.errorMessage?.contains("no longer lies in a directory") == true,
                "\(String(describing: task.errorMessage))"
            )
            #expect(files(in: outside).isEmpty)
        }
    }

    /// 5: the daemon keeps trying to record a task's end while its store is locked (here
    /// another process holds an exclusive transaction on it), says so, and records it once
    /// the lock goes: `ferry wait` returns, instead of seeing `running` for ever.
    @Test("13.5: a locked store delays, never loses, the end of a daemon task")
    func aLockedStoreDelaysButNeverLosesTheEnd() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            let output = daemon.directory.appendingPathComponent("locked.bin")
            // Stalls until the client leaves, so the task is still running when the lock is
            // taken; the cancel then ends it while the store is locked.
            let id = try await daemon.add([
                server.url("/bytes/200000?stall-at=100000").absoluteString, "-o", output.path,
            ])
            try await daemon.waitUntil(id, received: 100_000)
            let lock = try await StoreLock(daemon)
            defer { lock.stop() }
            // The cancel's answer waits for the store too: run it beside.
            let cancel = Task { try await daemon.ferry(["cancel", "\(id)"]) }
            let log = daemon.directory.appendingPathComponent("daemon.err")
            var said = false
            for _ in 0..<6000 where !said {
                said = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").contains(
                    "could not record the end of task \(id)"
                )
                if !said { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(said, "the daemon never said it could not record the end")
            try lock.release()
            _ = try await cancel.value
            #expect(try await finalState(of: id, daemon.client).state == .canceled)
        }
    }

    /// 15: the daemon's client asks the kernel who listens on the socket (`SO_PEERCRED`) and
    /// talks only to its own user's daemon: here a listener run as `nobody` answers like a
    /// daemon with no tasks, and `ferry ls` refuses it.
    @Test("13.15: the daemon client refuses a socket another user listens on", .enabled(if: geteuid() == 0))
    func theClientRefusesAnotherUsersSocket() async throws {
        let scratch = try makeTemporaryDirectory("peer")
        chmod(scratch.path, 0o777)
        let socketPath = scratch.appendingPathComponent("daemon.sock").path
        let script = """
            import socket
            s = socket.socket(socket.AF_UNIX); s.bind("\(socketPath)"); s.listen(8)
            body = b'{"tasks":[]}'
            while True:
                c, _ = s.accept()
                c.recv(65536)
                try:
                    c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Type: application/json\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % len(body) + body)
                except OSError:
                    pass
                c.close()
            """
        let pid = try ProcessRunner.spawn(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script],
            stdout: scratch.appendingPathComponent("out").path,
            stderr: scratch.appendingPathComponent("err").path
        )
        defer { ProcessRunner.stop(pid) }
        for _ in 0..<1000 where !FileManager.default.fileExists(atPath: socketPath) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let list = try await ProcessRunner.run(ferry, ["ls", "--socket", socketPath])
        #expect(list.status != 0, "\(list.stdoutText)")
        #expect(list.stderrText.contains("another user"), "\(list.stderrText)")
    }

    /// 8: a download to standard output that fails (here the server closes after 100 kB,
    /// with no retries) leaves nothing behind: the body streams to the reader and no copy
    /// of it is kept anywhere (it used to be written whole to a temporary file first,
    /// which a failure left in the temporary directory).
    @Test("13.8: a failed download to standard output leaves no copy behind")
    func aFailedDownloadToStandardOutputLeavesNothing() async throws {
        try await withServer { server in
            let temporary = try makeTemporaryDirectory("stdout-tmp")
            let url = server.url("/bytes/1000000?close-after=100000").absoluteString
            let result = try await ProcessRunner.run(
                ferry,
                ["get", "-q", "--retries", "0", url],
                environment: ["TMPDIR": temporary.path]
            )
            #expect(result.status != 0)
            #expect(result.stdout == TestContent.data(size: 100_000))
            let left = FileManager.default.subpaths(atPath: temporary.path) ?? []
            #expect(left.isEmpty, "left in TMPDIR: \(left)")
        }
    }

    /// 11: the daemon's tables stop growing: finished tasks past `--keep-finished` go, with
    /// their events, and `ferry clean` forgets the rest; the files stay.
    @Test("13.11: the daemon forgets finished tasks (--keep-finished, ferry clean)")
    func theDaemonForgetsFinishedTasks() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started(["--keep-finished", "2"])
            defer { DaemonProcess.killNine(pid) }
            var ids: [Int64] = []
            for index in 0..<4 {
                let output = daemon.directory.appendingPathComponent("f\(index).bin").path
                let id = try await daemon.add([server.url("/bytes/1000?seed=\(index)").absoluteString, "-o", output])
                ids.append(id)
                #expect(try await daemon.ferry(["wait", "-q", "\(id)"]).status == 0)
            }
            var kept: [Int64] = []
            for _ in 0..<500 {
                kept = try await daemon.client.tasks().compactMap(\.id)
                if kept.count <= 2 { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(kept == Array(ids.suffix(2)))
            // The events of the tasks that went, went with them.
            func cliEvents() async throws -> Int? {
                try await daemon.client.sessions().first { $0.identifier == "cli" }?.pendingEvents
            }
            #expect(try await cliEvents() == 2)
            let clean = try await daemon.ferry(["clean"])
            #expect(clean.stdoutText.contains("2 finished tasks removed"), "\(clean.stdoutText)\(clean.stderrText)")
            #expect(try await daemon.client.tasks().isEmpty)
            #expect(try await cliEvents() == 0)
            // Every file is where it was.
            #expect((0..<4).allSatisfy { files(in: daemon.directory).contains("f\($0).bin") })
        }
    }

    /// 11: polling for events only reads: it answers while another process holds the
    /// store's write lock (it used to write the session's row on every poll, and so waited
    /// for the lock, then failed).
    @Test("13.11: polling for events only reads")
    func pollingForEventsOnlyReads() async throws {
        try await withServer { _ in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }

            let lock = try await StoreLock(daemon)
            defer { lock.stop() }
            var polled: String
            do {
                polled = "\(try await daemon.client.events(session: "app", after: 0).count) events"
            } catch {
                polled = "\(error)"
            }
            try lock.release()
            #expect(polled == "0 events")
        }
    }

    /// 15: cancelling a queued daemon task removes its partial file only when the stored
    /// resume data names one of Ferry's partial files: resume data naming any other file
    /// (a store another process wrote to) never gets that file removed.
    @Test("13.15: the daemon removes only Ferry's partial files on a cancel")
    func theDaemonRemovesOnlyItsOwnPartialFiles() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            let id = try await daemon.add([
                server.url("/bytes/1000").absoluteString, "-o", daemon.directory.appendingPathComponent("q.bin").path,
                "--start-after", "3600",
            ])
            let victim = daemon.directory.appendingPathComponent("precious.txt")
            try Data("keep me\n".utf8).write(to: victim)
            let json = """
                {"bytesOnDisk": 8, "createdAt": "2026-11-22T04:31:07Z", "currentURL": "\(server.url("/bytes/1000"))",
                 "headers": {}, "method": "GET", "originalURL": "\(server.url("/bytes/1000"))",
                 "partialFile": "\(victim.absoluteString)", "validator": {"entityTag": "\\"x\\""}, "version": 1}
                """
            let planted = try ResumeData(decoding: Data(json.utf8))
            try BackgroundStore(directory: daemon.state).save(planted, for: BackgroundTaskRecord.resumeKey(for: id))
            #expect(try await daemon.ferry(["cancel", "\(id)"]).status == 0)
            #expect(try await daemon.client.task(id).state == .canceled)
            #expect(
                FileManager.default.fileExists(atPath: victim.path),
                "the cancel removed a file that is not a partial"
            )
        }
    }

    /// 15: the daemon never changes its umask (it is process-wide: transfers running on
    /// other threads would create their files under it); its socket is 0600 from its first
    /// moment because the socket is made 0600 before it is bound. Traced with strace.
    @Test(
        "13.15: the daemon never calls umask; its socket is 0600 from the start",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: "/usr/bin/strace")
                || ProcessInfo.processInfo.environment["CI"] == "true"
        )
    )
    func theDaemonNeverChangesItsUmask() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let trace = daemon.directory.appendingPathComponent("umask.trace")
            let tracer = try ProcessRunner.spawn(
                "/usr/bin/strace",
                ["-f", "-qq", "-e", "trace=umask", "-o", trace.path, ProcessRunner.ferry, "daemon"] + daemon.arguments,
                stdout: daemon.directory.appendingPathComponent("daemon.out").path,
                stderr: daemon.directory.appendingPathComponent("daemon.err").path
            )
            var exited = false
            defer { if !exited { ProcessRunner.stop(tracer) } }
            var answering = false
            for _ in 0..<1000 where !answering {
                answering = (try? await daemon.client.health()) == true
                if !answering { try await Task.sleep(for: .milliseconds(20)) }
            }
            try #require(answering, "the traced daemon did not answer")
            let mode = try FileManager.default.attributesOfItem(atPath: daemon.socket.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            let id = try await daemon.add([
                server.url("/bytes/1000").absoluteString, "-o", daemon.directory.appendingPathComponent("u/f.bin").path,
            ])
            #expect(try await finalState(of: id, daemon.client).state == .completed)
            let daemonPID = try #require(await daemon.client.daemonPID())
            kill(daemonPID, SIGTERM)
            var status: Int32 = 0
            for _ in 0..<500 where !exited {
                exited = waitpid(tracer, &status, WNOHANG) == tracer
                if !exited { try await Task.sleep(for: .milliseconds(20)) }
            }
            let calls = ((try? String(contentsOf: trace, encoding: .utf8)) ?? "").split(separator: "\n")
                .filter { $0.contains("umask(") }
            #expect(calls.isEmpty, "\(calls)")
        }
    }

    /// Adds a bearer token to every request, as an app's interceptor would.
    private struct AddsAuthorization: RequestInterceptor {
        func adapt(_ request: URLRequest, for session: Session) async throws -> URLRequest {
            var request = request
            request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
            return request
        }
    }
}

/// Another process holding the daemon store's write lock (an exclusive SQLite
/// transaction) until ``release()``.
private struct StoreLock {
    let process: pid_t
    let released: URL

    init(_ daemon: DaemonProcess) async throws {
        let locked = daemon.directory.appendingPathComponent("locked")
        released = daemon.directory.appendingPathComponent("release")
        process = try ProcessRunner.spawn(
            "/usr/bin/python3",
            [
                "-c",
                """
                import sqlite3, os, time
                c = sqlite3.connect("\(daemon.state.appendingPathComponent("ferry.sqlite").path)", isolation_level=None, timeout=60)
                c.execute("BEGIN EXCLUSIVE")
                open("\(locked.path)", "w").close()
                while not os.path.exists("\(released.path)"): time.sleep(0.01)
                c.execute("COMMIT")
                """,
            ],
            stdout: daemon.directory.appendingPathComponent("holder.out").path,
            stderr: daemon.directory.appendingPathComponent("holder.err").path
        )
        for _ in 0..<1000 where !FileManager.default.fileExists(atPath: locked.path) {
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Lets the transaction commit.
    func release() throws { try Data().write(to: released) }

    func stop() { ProcessRunner.stop(process) }
}
