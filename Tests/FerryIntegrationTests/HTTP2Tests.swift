import Ferry
import FerryTestServer
import Foundation
import Testing

/// HTTP/2 against nginx (`listen … ssl http2`), a server nobody here wrote: downloads over
/// multiplexed streams are byte-identical, and concurrent ones use one connection per event
/// loop, never one per request.
@Suite("HTTP/2 against nginx", .serialized, .enabled(if: Nginx.enabled))
struct HTTP2Tests {
    @Test func concurrentDownloadsShareAConnectionPerEventLoop() async throws {
        let root = try makeTemporaryDirectory("h2-root")
        let output = try makeTemporaryDirectory("h2-out")
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: output)
        }
        let count = 60
        var digests: [String] = []
        for index in 0..<count {
            let bytes = Data((0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
            try bytes.write(to: root.appendingPathComponent("\(index).bin"))
            digests.append(sha256Hex(bytes))
        }
        let ca = try TestPKI(name: "Ferry HTTP/2 CA \(UUID().uuidString.prefix(8))")
        let (certificate, key) = try ca.issueServerIdentity(for: ["127.0.0.1"]).writePEMFiles(in: root)
        let nginx = try await Nginx(
            serving: root,
            server: """
                ssl_certificate \(certificate.path); ssl_certificate_key \(key.path);
                access_log \(root.path)/connections.log connections;
                """,
            listen: "ssl http2"
        )
        defer { nginx.stop() }

        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 6
        configuration.tls.trustRoots = .custom(pem: ca.certificatePEM)
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let first = try #require(URL(string: "https://127.0.0.1:\(nginx.port)/0.bin"))
        let (_, response) = try await session.download(from: first, to: .file(output.appendingPathComponent("0")))
        #expect(response.statusCode == 200)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 1..<count {
                let url = try #require(URL(string: "https://127.0.0.1:\(nginx.port)/\(index).bin"))
                let target = output.appendingPathComponent("\(index)")
                group.addTask { _ = try await session.download(from: url, to: .file(target)) }
            }
            try await group.waitForAll()
        }
        for index in 0..<count {
            let data = try Data(contentsOf: output.appendingPathComponent("\(index)"))
            #expect(sha256Hex(data) == digests[index], "file \(index)")
        }
        let lines = try String(contentsOf: root.appendingPathComponent("connections.log"), encoding: .utf8)
            .split(separator: "\n")
        #expect(lines.count == count)
        #expect(lines.allSatisfy { $0.hasSuffix(" HTTP/2.0 200") }, "every request over HTTP/2")
        let connections = Set(lines.map { $0.split(separator: " ")[0] })
        // The engine's event loops: one per core (NIO's singleton group).
        let loops = ProcessInfo.processInfo.activeProcessorCount
        #expect(connections.count <= loops, "\(connections.count) connections for \(loops) event loops")
    }
}

/// What a user meets over HTTP/2, against nginx: the protocol flags beside curl's, flow
/// control with a reader that stops, a stream the server resets, a reload in the middle of a
/// transfer (GOAWAY, then the old worker's close), resume and segments, and the same
/// credential and redirect rules as HTTP/1.1.
@Suite("HTTP/2 paths against nginx", .serialized, .enabled(if: Nginx.enabled))
struct HTTP2PathTests {
    /// `--http1.1` and `--http2` choose the protocol for `get`, `put` and `upload` as curl's
    /// flags do (the last one given wins), and every body arrives whole.
    @Test func theHTTPVersionFlagsChooseWhatCurlsDo() async throws {
        try await withServer { sink in
            let root = try await makeHTTP2Root("h2-flags")
            defer { try? FileManager.default.removeItem(at: root) }
            let origin = try await HTTP2Origin(
                root: root,
                server: """
                    location /put/ { dav_methods PUT; create_full_put_path on; client_max_body_size 0; }
                    location /sink { proxy_pass http://127.0.0.1:\(sink.port); client_max_body_size 0; }
                    """
            )
            defer { origin.stop() }
            let source = root.appendingPathComponent("file.bin")
            let file = try origin.url("/file.bin").absoluteString
            let ca = ["--cacert", origin.caFile.path]
            let out = { (name: String) in root.appendingPathComponent("out/\(name)").path }
            let ferry = ProcessRunner.ferry
            let runs: [(name: String, command: [String], logged: String)] = [
                ("ferry get", [ferry, "get", "--quiet"] + ca + ["-o", out("1"), file], "HTTP/2.0 GET /file.bin 200"),
                (
                    "ferry get --http1.1", [ferry, "get", "--quiet", "--http1.1"] + ca + ["-o", out("2"), file],
                    "HTTP/1.1 GET /file.bin 200"
                ),
                (
                    "ferry get --http1.1 --http2",
                    [ferry, "get", "--quiet", "--http1.1", "--http2"] + ca + ["-o", out("3"), file],
                    "HTTP/2.0 GET /file.bin 200"
                ),
                (
                    "curl --http2", ["/usr/bin/curl", "-sS", "--http2"] + ca + ["-o", out("4"), file],
                    "HTTP/2.0 GET /file.bin 200"
                ),
                (
                    "curl --http1.1", ["/usr/bin/curl", "-sS", "--http1.1"] + ca + ["-o", out("5"), file],
                    "HTTP/1.1 GET /file.bin 200"
                ),
                (
                    "ferry put",
                    [ferry, "put", "--quiet"] + ca + [source.path, try origin.url("/put/6").absoluteString],
                    "HTTP/2.0 PUT /put/6 201"
                ),
                (
                    "ferry put --http1.1",
                    [ferry, "put", "--quiet", "--http1.1"] + ca + [
                        source.path, try origin.url("/put/7").absoluteString,
                    ],
                    "HTTP/1.1 PUT /put/7 201"
                ),
                (
                    "ferry upload",
                    [ferry, "upload", "--quiet"] + ca + [
                        "-F", "file=@\(source.path)", "-o", out("8.json"), try origin.url("/sink").absoluteString,
                    ],
                    "HTTP/2.0 POST /sink 200"
                ),
                (
                    "ferry upload --http1.1",
                    [ferry, "upload", "--quiet", "--http1.1"] + ca + [
                        "-F", "file=@\(source.path)", "-o", out("9.json"), try origin.url("/sink").absoluteString,
                    ],
                    "HTTP/1.1 POST /sink 200"
                ),
            ]
            for (index, run) in runs.enumerated() {
                let result = try await ProcessRunner.run(run.command[0], Array(run.command.dropFirst()))
                #expect(result.status == 0, "\(run.name): \(result.stderrText)")
                // Uploads first ask whether the server offers resumable uploads (nginx does not).
                let lines = try origin.logged().filter { !$0.contains(" OPTIONS ") }
                #expect(lines.count == index + 1, "\(run.name): \(lines)")
                #expect(lines.last?.hasPrefix(run.logged) == true, "\(run.name): \(lines.last ?? "nothing logged")")
            }
            let expected = try await sha256(of: source)
            for name in ["out/1", "out/2", "out/3", "out/4", "out/5", "put/6", "put/7"] {
                #expect(try await sha256(of: root.appendingPathComponent(name)) == expected, "\(name)")
            }
            let size = try #require(try FileManager.default.attributesOfItem(atPath: source.path)[.size] as? Int)
            for name in ["8.json", "9.json"] {
                let answer = try Data(contentsOf: root.appendingPathComponent("out/\(name)"))
                let json = try #require(try JSONSerialization.jsonObject(with: answer) as? [String: Any])
                let bytes = try #require(json["bytes"] as? Int)
                // The multipart body: the file and its part's framing.
                #expect(bytes > size && bytes < size + 1024, "\(name): \(bytes) bytes for a file of \(size)")
            }
        }
    }

    /// `TLSOptions.offersHTTP2`: on (the default) the session speaks HTTP/2 with a server
    /// that offers it; off, HTTP/1.1, and the response says which.
    @Test func aSessionThatDoesNotOfferHTTP2SpeaksHTTP11() async throws {
        let root = try await makeHTTP2Root("h2-offer")
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(root: root)
        defer { origin.stop() }
        let expected = try Data(contentsOf: root.appendingPathComponent("file.bin"))
        for offers in [true, false] {
            let session = try origin.session { $0.tls.offersHTTP2 = offers }
            defer { session.invalidateAndCancel() }
            let (data, response) = try await session.data(from: try origin.url("/file.bin"))
            #expect(data == expected)
            #expect(response.httpVersion == (offers ? "HTTP/2.0" : "HTTP/1.1"))
            #expect(try origin.logged().last?.hasPrefix(offers ? "HTTP/2.0 GET" : "HTTP/1.1 GET") == true)
        }
    }

    /// Flow control: readers that stop reading hold up only their own streams. A download on
    /// the same connection completes while they wait (each body is larger than a stream's
    /// window, so nginx must wait for their WINDOW_UPDATEs), and then every body is whole.
    @Test func readersThatStopHoldUpOnlyTheirOwnStreams() async throws {
        let root = try await makeHTTP2Root("h2-flow", mebibytes: 12)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(root: root)
        defer { origin.stop() }
        let session = try origin.session { $0.httpMaximumConnectionsPerHost = 8 }
        defer { session.invalidateAndCancel() }
        let url = try origin.url("/file.bin")
        let expected = try await sha256(of: root.appendingPathComponent("file.bin"))
        // Known to speak HTTP/2 before the rest start (see Engine.pinsConnection(for:)).
        _ = try await session.data(from: try origin.url("/small.txt"))
        let gate = AsyncGate()
        let readers = 5
        let started = MutexBox(0)
        try Data("small".utf8).write(to: root.appendingPathComponent("small.txt"))
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<readers {
                group.addTask {
                    let (bytes, response) = try await session.bytes(from: url)
                    #expect(response.httpVersion == "HTTP/2.0")
                    started.mutate { $0 += 1 }
                    await gate.wait()
                    var body = Data()
                    for try await chunk in bytes.chunks { body.append(chunk) }
                    return sha256Hex(body)
                }
            }
            // Every reader has its head and has stopped reading.
            while started.value < readers { try await Task.sleep(for: .milliseconds(5)) }
            let target = root.appendingPathComponent("out/fast.bin")
            let (_, response) = try await session.download(from: url, to: .file(target))
            #expect(response.httpVersion == "HTTP/2.0")
            #expect(try await sha256(of: target) == expected, "the download beside the stopped readers")
            await gate.open()
            for try await digest in group { #expect(digest == expected) }
        }
        // nginx logs a request when it ends: the download's line comes before the readers'.
        // At most one connection per event loop, so the download shared one with a stopped
        // reader.
        let logged = try origin.logged().map { $0.split(separator: " ") }
        #expect(logged.count == readers + 2, "\(logged)")
        let bodies = logged.filter { $0[2] == "/file.bin" }
        let fast = try #require(bodies.first?.last)
        #expect(bodies.dropFirst().contains { $0.last == fast }, "\(logged)")
    }

    /// A stream nginx resets (RST_STREAM: its upstream broke off) fails with a clear error,
    /// and `ferry get` resumes it on the same connection until the file is whole.
    @Test func aResetStreamIsResumedOnTheSameConnection() async throws {
        try await withServer { server in
            let root = try await makeHTTP2Root("h2-reset")
            defer { try? FileManager.default.removeItem(at: root) }
            let origin = try await HTTP2Origin(
                root: root,
                server: "location /up/ { proxy_pass http://127.0.0.1:\(server.port)/; }"
            )
            defer { origin.stop() }
            let output = root.appendingPathComponent("out/cut.bin")
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "-v", "--cacert", origin.caFile.path, "-o", output.path,
                    try origin.url("/up/bytes/3000000?seed=5&close-after=1000000").absoluteString,
                ]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(result.stderrText.contains("reset the HTTP/2 stream (INTERNAL_ERROR)"), "\(result.stderrText)")
            let plain = try Session(configuration: .ephemeral)
            defer { plain.invalidateAndCancel() }
            let (direct, _) = try await plain.data(from: server.url("/bytes/3000000?seed=5"))
            #expect(try Data(contentsOf: output) == direct)
            // How much of each cut response reached the client depends on what nginx had sent
            // when its upstream broke off; every one after the first continues where the
            // file on disk ended, on the same connection.
            let lines = try origin.logged().map { $0.split(separator: " ").map(String.init) }
            #expect(lines.count >= 3, "\(lines)")
            #expect(lines.allSatisfy { $0[0] == "HTTP/2.0" && $0[2] == "/up/bytes/3000000" }, "\(lines)")
            #expect(lines.first?[3] == "200")
            let offsets = lines.dropFirst().map { $0[3] == "206" ? Int($0[4].dropFirst(6).dropLast()) ?? -1 : -1 }
            #expect(offsets.allSatisfy { $0 > 0 } && offsets == offsets.sorted(), "\(lines)")
        }
    }

    /// nginx reloads in the middle of a download: the old worker sends GOAWAY and closes the
    /// connection 100 ms later; `ferry get` resumes over a new connection, with If-Range.
    @Test func aReloadInTheMiddleOfADownloadIsResumed() async throws {
        let root = try await makeHTTP2Root("h2-reload", mebibytes: 32)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(
            root: root,
            server: "location /slow/ { alias \(root.path)/; limit_rate 4m; }",
            reloadable: true
        )
        defer { origin.stop() }
        let scratch = root.appendingPathComponent("out")
        let output = scratch.appendingPathComponent("reloaded.bin")
        let pid = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            [
                "get", "--cacert", origin.caFile.path, "-o", output.path,
                try origin.url("/slow/file.bin").absoluteString,
            ],
            stdout: root.appendingPathComponent("stdout").path,
            stderr: root.appendingPathComponent("stderr").path
        )
        // 32 MiB at 4 MiB/s: the reload comes while the old worker is sending the body.
        while partialBytes(in: scratch) < 1 << 20 { try await Task.sleep(for: .milliseconds(5)) }
        origin.nginx.reload()
        #expect(try await exitStatus(of: pid) == 0)
        #expect(try await sha256(of: output) == sha256(of: root.appendingPathComponent("file.bin")))
        let lines = try origin.logged()
        #expect(lines.count == 2, "\(lines)")
        #expect(lines.first?.hasPrefix("HTTP/2.0 GET /slow/file.bin 200") == true)
        #expect(lines.last?.hasPrefix("HTTP/2.0 GET /slow/file.bin 206 bytes=") == true)
    }

    /// A download cancelled with resume data continues over HTTP/2 with a range, and a
    /// segmented download's ranges all arrive over HTTP/2, byte-identical, each connection
    /// it asked for a connection of its own.
    @Test func resumeAndSegmentsOverHTTP2() async throws {
        let root = try await makeHTTP2Root("h2-resume", mebibytes: 8)
        defer { try? FileManager.default.removeItem(at: root) }
        let origin = try await HTTP2Origin(
            root: root,
            server: "location /slow/ { alias \(root.path)/; limit_rate 2m; }"
        )
        defer { origin.stop() }
        let expected = try await sha256(of: root.appendingPathComponent("file.bin"))
        let session = try origin.session()
        defer { session.invalidateAndCancel() }
        let target = root.appendingPathComponent("out/resumed.bin")
        let task = session.downloadTask(with: try origin.url("/slow/file.bin"), to: .file(target))
        let events = task.events
        task.resume()
        for await event in events { if case .wroteData = event { break } }
        let resumeData = try #require(await task.cancelProducingResumeData())
        #expect(resumeData.bytesOnDisk > 0)
        let (_, resumed) = try await session.download(resumingWith: resumeData, to: .file(target))
        #expect(resumed.statusCode == 206 && resumed.httpVersion == "HTTP/2.0")
        #expect(try await sha256(of: target) == expected)

        let before = try origin.logged()
        #expect(before.count == 2 && before.allSatisfy { $0.hasPrefix("HTTP/2.0 ") }, "\(before)")

        // Four connections asked for, four connections used, each speaking HTTP/2: the
        // segments are not multiplexed on one (2 MiB/s a response: every connection has a
        // segment before the file is whole).
        let segmented = root.appendingPathComponent("out/segmented.bin")
        let result = try await ProcessRunner.run(
            ProcessRunner.ferry,
            [
                "get", "--quiet", "-s", "4", "--min-split-size", "1M", "--cacert", origin.caFile.path,
                "-o", segmented.path, try origin.url("/slow/file.bin").absoluteString,
            ]
        )
        #expect(result.status == 0, "\(result.stderrText)")
        #expect(try await sha256(of: segmented) == expected)
        let lines = try origin.logged().dropFirst(before.count).map { $0.split(separator: " ") }
        #expect(lines.allSatisfy { $0[0] == "HTTP/2.0" }, "\(lines)")
        #expect(lines.filter { $0[3] == "206" }.count >= 3, "\(lines)")
        #expect(Set(lines.compactMap { $0.last.map(String.init) }).count == 4, "connections: \(lines)")
    }

    /// Credentials and redirects follow HTTP/1.1's rules over HTTP/2: `-u` goes with a
    /// redirect on the same origin and is dropped on the way to another, as curl does.
    @Test func credentialsAndRedirectsFollowHTTP11sRules() async throws {
        let root = try await makeHTTP2Root("h2-auth")
        defer { try? FileManager.default.removeItem(at: root) }
        let other = try await HTTP2Origin(root: root)
        defer { other.stop() }
        let origin = try await HTTP2Origin(
            root: root,
            server: """
                location = /here { return 302 /file.bin; }
                location = /away { return 302 https://127.0.0.1:\(other.nginx.port)/file.bin; }
                """,
            ca: other.ca
        )
        defer { origin.stop() }
        let expected = try await sha256(of: root.appendingPathComponent("file.bin"))
        var seen: [String: [String]] = [:]
        for version in ["--http1.1", "--http2", "curl"] {
            var lines: [String] = []
            for path in ["/here", "/away"] {
                let output = root.appendingPathComponent("out/\(version.filter(\.isLetter))\(path.dropFirst())")
                let command =
                    version == "curl"
                    ? [
                        "/usr/bin/curl", "-sS", "-L", "-u", "user:secret", "--cacert", other.caFile.path, "-o",
                        output.path,
                    ]
                    : [
                        ProcessRunner.ferry, "get", "--quiet", version, "-u", "user:secret", "--cacert",
                        other.caFile.path, "-o", output.path,
                    ]
                let before = (try origin.logged().count, try other.logged().count)
                let result = try await ProcessRunner.run(
                    command[0],
                    Array(command.dropFirst()) + [try origin.url(path).absoluteString]
                )
                #expect(result.status == 0, "\(version) \(path): \(result.stderrText)")
                #expect(try await sha256(of: output) == expected, "\(version) \(path)")
                let logged =
                    Array(try origin.logged().dropFirst(before.0)) + Array(try other.logged().dropFirst(before.1))
                // Without the protocol and the connection: compared across versions.
                lines += logged.map { $0.split(separator: " ").dropFirst().dropLast().joined(separator: " ") }
            }
            seen[version] = lines
        }
        let basic = "[Basic dXNlcjpzZWNyZXQ=]"
        #expect(
            seen["--http2"] == [
                "GET /here 302 - \(basic)", "GET /file.bin 200 - \(basic)",
                "GET /away 302 - \(basic)", "GET /file.bin 200 - [-]",
            ]
        )
        #expect(seen["--http1.1"] == seen["--http2"])
        #expect(seen["curl"] == seen["--http2"])
    }
}

/// The size of the `.partial` file in `directory`, 0 while there is none.
private func partialBytes(in directory: URL) -> Int64 {
    files(in: directory).filter { $0.hasSuffix(".partial") }.compactMap {
        try? FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent($0).path)[.size] as? Int64
    }.max() ?? 0
}

/// Opens once; everyone waiting, and everyone who comes later, goes on.
private actor AsyncGate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}
