import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A character device like `/dev/null` (1, 3), made in the test's own directory: tests never
/// write to the machine's `/dev/null`.
func makeNullDevice(in directory: URL) throws -> URL {
    let node = directory.appendingPathComponent("null")
    // major 1, minor 3 in the kernel's (small-number) encoding.
    try #require(mknod(node.path, S_IFCHR | 0o666, dev_t((1 << 8) | 3)) == 0, "mknod: \(errno)")
    return node
}

/// The file type bits of `url` (`S_IFCHR`, `S_IFIFO`, `S_IFREG`…), not following links.
func fileType(_ url: URL) -> mode_t? {
    var info = stat()
    guard lstat(url.path, &info) == 0 else { return nil }
    return info.st_mode & S_IFMT
}

/// Runs a blocking read on a thread of its own (opening a FIFO, reading a pipe to its end
/// block), off the cooperative pool the in-process servers need.
func readOnAThread(_ read: @escaping @Sendable () throws -> Data) -> Task<Data, any Error> {
    Task.detached {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try read() }) }.start()
        }
    }
}

/// Reads a FIFO to its end: opening blocks until the writer opens its end.
func readFIFO(_ fifo: URL) -> Task<Data, any Error> {
    readOnAThread {
        let descriptor = open(fifo.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        return try FileHandle(fileDescriptor: descriptor, closeOnDealloc: true).readToEnd() ?? Data()
    }
}

@Suite("Outputs that are not regular files", .serialized)
struct OutputTests {
    let ferry = ProcessRunner.ferry

    /// `-o` naming a character device: written into, never replaced; no partial file, no
    /// lock, nothing else created beside it. For `get`, `upload` and `put`, and the library.
    @Test(.enabled(if: geteuid() == 0, "mknod needs root"))
    func aDeviceNodeIsWrittenIntoNeverReplaced() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("device")
            defer { try? FileManager.default.removeItem(at: directory) }
            let null = try makeNullDevice(in: directory)
            let body = directory.appendingPathComponent("body.txt")
            try Data("payload".utf8).write(to: body)
            let runs = [
                ["get", "-q", "-o", null.path, server.url("/bytes/100000").absoluteString],
                ["get", "-q", "-c", "-o", null.path, server.url("/bytes/1000").absoluteString],
                ["upload", "-q", "-F", "a=b", "-o", null.path, server.url("/sink").absoluteString],
                ["put", "-q", body.path, server.url("/sink").absoluteString, "-o", null.path],
            ]
            for arguments in runs {
                let result = try await ProcessRunner.run(ferry, arguments)
                #expect(result.status == 0, "\(arguments): \(result.stderrText)")
                #expect(fileType(null) == S_IFCHR, "\(arguments) replaced the device")
                #expect(files(in: directory) == ["body.txt", "null"], "\(arguments) left \(files(in: directory))")
            }
            // The library's destination does the same.
            let session = try makeSession()
            let (location, _) = try await session.download(from: server.url("/bytes/5000"), to: .file(null))
            #expect(location == null)
            #expect(fileType(null) == S_IFCHR)
            // And a destination chosen from the response never lands on one.
            await #expect {
                try await session.download(
                    from: server.url("/bytes/10?filename=null"),
                    to: .directory(directory)
                )
            } throws: { error in
                (error as? FerryError)?.reason == .fileSystem
            }
            #expect(fileType(null) == S_IFCHR)
            #expect(files(in: directory) == ["body.txt", "null"])
        }
    }

    /// A FIFO given as `-o` gets the body in order; `-c` says it has no effect there.
    @Test func aFIFOReceivesTheBodyInOrder() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("fifo")
            defer { try? FileManager.default.removeItem(at: directory) }
            let fifo = directory.appendingPathComponent("pipe")
            try #require(mkfifo(fifo.path, 0o600) == 0)
            let reader = readFIFO(fifo)
            let result = try await ProcessRunner.run(
                ferry,
                ["get", "-c", "-o", fifo.path, server.url("/bytes/300000?seed=7").absoluteString]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(result.stderrText.contains("-c has no effect"))
            #expect(try await reader.value == TestContent.data(size: 300_000, seed: 7))
            #expect(fileType(fifo) == S_IFIFO)
            #expect(files(in: directory) == ["pipe"])
        }
    }

    /// No -o, and `-o -`: the body on standard output, and no temporary copy anywhere (the
    /// run's TMPDIR stays empty).
    @Test func standardOutputGetsTheBodyWithNoTemporaryCopy() async throws {
        try await withServer { server in
            let temporary = try makeTemporaryDirectory("stdout-tmp")
            defer { try? FileManager.default.removeItem(at: temporary) }
            for output in [[], ["-o", "-"]] {
                let result = try await ProcessRunner.run(
                    ferry,
                    ["get", "-q"] + output + [server.url("/bytes/2000000?seed=4").absoluteString],
                    environment: ["TMPDIR": temporary.path]
                )
                #expect(result.status == 0, "\(result.stderrText)")
                #expect(result.stdout == TestContent.data(size: 2_000_000, seed: 4))
                #expect(files(in: temporary).isEmpty, "left \(files(in: temporary))")
                #expect(!FileManager.default.fileExists(atPath: "-"))
            }
        }
    }

    /// Bytes reach standard output as they arrive: the server sends 1,000 bytes and then
    /// nothing until the client leaves, and `head -c 1000` still gets them (a download that
    /// went to a temporary file first would wait for the whole body).
    @Test func standardOutputStreamsBytesAsTheyArrive() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("streams")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let url = server.url("/bytes/100000?seed=2&stall-at=1000").absoluteString
            let out = scratch.appendingPathComponent("out").path
            // head returns once it has 1,000 bytes; then the stalled ferry is stopped.
            let result = try await ProcessRunner.bash(
                #"mkfifo '\#(out)'; "$FERRY" get -q --retries 0 '\#(url)' > '\#(out)' & ferry=$!; "#
                    + #"head -c 1000 < '\#(out)'; kill $ferry"#
            )
            #expect(result.stdout == TestContent.data(size: 1000, seed: 2))
        }
    }

    /// `ferry get URL | head -c1` stops the transfer: ferry exits 23 as curl does (broken
    /// pipe), and nginx sent only a small part of the 256 MiB file.
    @Test(.enabled(if: Nginx.enabled))
    func aReaderThatGoesAwayStopsTheTransferLikeCurl() async throws {
        let root = try makeTemporaryDirectory("head-root")
        defer { try? FileManager.default.removeItem(at: root) }
        try await makeRandomFile(root.appendingPathComponent("big.bin"), mebibytes: 256)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/big.bin"
        for client in [#""$FERRY" get -q"#, "curl -s"] {
            let result = try await ProcessRunner.bash(
                #"\#(client) '\#(url)' | head -c 1; echo " status=${PIPESTATUS[0]}" >&2"#
            )
            #expect(result.stdout.count == 1)
            #expect(result.stderrText.contains("status=23"), "\(client): \(result.stderrText)")
        }
        let sent = try String(contentsOf: nginx.accessLog, encoding: .utf8).split(separator: "\n")
            .compactMap { Int64($0.split(separator: " ").last ?? "") }
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { $0 < 64 << 20 }, "bytes sent: \(sent)")
    }

    /// Retries only while nothing was written: a connection lost after 50,000 bytes ends the
    /// run with exactly those bytes on standard output (a retry would repeat them); a 503
    /// before any byte is retried.
    @Test func standardOutputIsRetriedOnlyBeforeTheFirstByte() async throws {
        try await withServer { server in
            let cut = try await ProcessRunner.run(
                ferry,
                ["get", "-q", "--retries", "3", server.url("/bytes/100000?seed=5&close-after=50000").absoluteString]
            )
            #expect(cut.status != 0)
            #expect(cut.stdout == TestContent.data(size: 50_000, seed: 5))
            #expect(cut.stderrText.contains("50000 bytes were already written to standard output"))
            #expect(server.requests.filter { $0.uri.hasPrefix("/bytes/100000") }.count == 1)

            let unavailable = try await ProcessRunner.run(
                ferry,
                ["get", "-q", "--retries", "2", server.url("/status/503").absoluteString]
            )
            #expect(unavailable.status == 22)
            #expect(unavailable.stdout.isEmpty)
            #expect(server.requests.filter { $0.uri == "/status/503" }.count == 3)
        }
    }

    /// `-o /dev/stdout` writes into the process's own standard output at its offset: after
    /// a shell's `>>`, the body is appended, as `-o -` would; the file is never replaced.
    @Test func devStdoutIsTheProcessesOwnStandardOutput() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("devstdout")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let file = scratch.appendingPathComponent("log.txt").path
            let url = server.url("/bytes/70000?seed=6").absoluteString
            let result = try await ProcessRunner.bash(
                #"echo first > '\#(file)'; "$FERRY" get -q -o /dev/stdout '\#(url)' >> '\#(file)'"#
            )
            #expect(result.status == 0, "\(result.stderrText)")
            let written = try Data(contentsOf: URL(fileURLWithPath: file))
            #expect(written == Data("first\n".utf8) + TestContent.data(size: 70_000, seed: 6))
            #expect(files(in: scratch) == ["log.txt"])
        }
    }

    /// A path under /dev that does not exist is refused, never created.
    @Test func aMissingPathUnderDevIsRefused() async throws {
        try await withServer { server in
            let path = "/dev/ferry-test-\(UUID().uuidString.prefix(8))"
            let result = try await ProcessRunner.run(
                ferry,
                ["get", "-o", path, server.url("/bytes/10").absoluteString]
            )
            #expect(result.status == 23)
            #expect(result.stderrText.contains("never creates files under /dev"))
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    /// The library's stream destination: the body into a pipe, in order, as it arrives.
    @Test func aStreamDestinationWritesIntoAPipe() async throws {
        try await withServer { server in
            let session = try makeSession()
            let pipe = Pipe()
            let descriptor = pipe.fileHandleForWriting.fileDescriptor
            let reader = readOnAThread { try pipe.fileHandleForReading.readToEnd() ?? Data() }
            let (location, response) = try await session.download(
                from: server.url("/bytes/500000?seed=9"),
                to: .stream(to: pipe.fileHandleForWriting)
            )
            try pipe.fileHandleForWriting.close()
            #expect(response.statusCode == 200)
            #expect(location.path == "/dev/fd/\(descriptor)")
            #expect(try await reader.value == TestContent.data(size: 500_000, seed: 9))
        }
    }

    /// Declared last in this serialized suite: after every output case above (and whatever
    /// ran beside them), the machine's `/dev/null` is still the character device (1, 3).
    /// `.ci/run` checks it once more after the whole suite.
    @Test func theMachinesDevNullIsStillACharacterDevice() throws {
        var info = stat()
        try #require(lstat("/dev/null", &info) == 0)
        #expect(info.st_mode & S_IFMT == S_IFCHR)
        #expect(info.st_rdev == dev_t((1 << 8) | 3))
    }
}
