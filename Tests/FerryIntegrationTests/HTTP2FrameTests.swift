import Ferry
import FerryTestServer
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Keeps the interim responses the delegate hears.
final class InterimDelegate: SessionDelegate {
    let heard = Mutex<[HTTPResponse]>([])

    func session(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPResponse) {
        heard.withLock { $0.append(response) }
    }
}

/// hyper-h2 (PyPI's `h2`) serving over TLS the frames nginx never sends (Support/h2_frames.py).
enum HyperH2 {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/h2_frames.py")
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_HYPER_H2"] == "1" }
    static let isAvailable = pythonCanImport("h2.connection")
    static var enabled: Bool { isAvailable || required }

    /// The body every path sends: `size` bytes, byte `i` being `i % 251`.
    static func body(_ size: Int) -> Data {
        Data((0..<size).map { UInt8($0 % 251) })
    }
}

/// The frames of a response that Ferry takes round `NIOHTTP2Handler` (HTTP2DataBypass):
/// padded, empty, with trailers, with a wrong `content-length`, or past the window, from a
/// server nobody here wrote.
@Suite("HTTP/2 frames from hyper-h2 (PyPI)", .serialized, .enabled(if: HyperH2.enabled))
struct HTTP2FrameTests {
    /// Starts the server with a certificate from a CA of its own; `body` gets a session that
    /// trusts it and the server's base URL.
    func withServer(
        delegate: (any SessionDelegate)? = nil,
        _ body: (Session, String, ServerProcess) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory("h2-frames")
        defer { try? FileManager.default.removeItem(at: directory) }
        let ca = try TestPKI(name: "Ferry hyper-h2 CA \(UUID().uuidString.prefix(8))")
        let (certificate, key) = try ca.issueServerIdentity(for: ["127.0.0.1"]).writePEMFiles(in: directory)
        try ca.certificatePEM.write(to: directory.appendingPathComponent("ca.pem"), atomically: true, encoding: .utf8)
        let server = try await ServerProcess(
            "/usr/bin/env",
            ["python3", HyperH2.script.path, "PORT", certificate.path, key.path]
        )
        defer { server.stop() }
        let session = try makeSession(delegate: delegate) { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
        defer { session.invalidateAndCancel() }
        try await Self.$caFile.withValue(directory.appendingPathComponent("ca.pem")) {
            try await body(session, "https://127.0.0.1:\(server.port)", server)
        }
    }

    /// Resumes `task` and returns its events up to its completion.
    static func events(of task: SessionTask) async -> [TaskEvent] {
        let events = task.events
        task.resume()
        var seen: [TaskEvent] = []
        for await event in events {
            seen.append(event)
            if case .completed = event { break }
        }
        return seen
    }

    /// The server's CA as a PEM file, inside ``withServer(delegate:_:)``.
    @TaskLocal static var caFile: URL?

    /// A trailer section after the body: an event after the last byte and before the end,
    /// for data tasks and downloads, its fields the server's; `ferry get -v` shows them.
    @Test func trailersAreToldAfterTheBody() async throws {
        try await withServer { session, base, _ in
            let url = try #require(URL(string: base + "/trailers?size=100000"))
            for kind in ["data", "download"] {
                let task: SessionTask =
                    kind == "data"
                    ? session.dataTask(with: URLRequest(url: url))
                    : session.downloadTask(
                        with: URLRequest(url: url),
                        to: .file(try makeTemporaryDirectory("h2-trailers").appendingPathComponent("t.bin"))
                    )
                let seen = await Self.events(of: task)
                #expect(task.error == nil, "\(kind)")
                let names = seen.map(\.name)
                let at = try #require(names.firstIndex(of: "trailers"), "\(kind): \(names)")
                #expect(at > (names.lastIndex(of: "data") ?? names.lastIndex(of: "wroteData") ?? 0), "\(names)")
                #expect(at < (names.firstIndex(of: "completed") ?? 0))
                guard case .trailers(let fields) = seen[at] else { return }
                #expect(fields["x-checksum"] == "none", "\(kind)")
            }
            let ca = try #require(Self.caFile).path
            let out = try makeTemporaryDirectory("h2-trailers-out").appendingPathComponent("body")
            let ours = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-v", "--cacert", ca, "-o", out.path, url.absoluteString]
            )
            #expect(ours.status == 0, "\(ours.stderrText)")
            // As curl -v shows a chunked body's trailers (curl 7.88 shows none of HTTP/2's).
            #expect(ours.stderrText.contains("< x-checksum: none\n"), "\(ours.stderrText)")
        }
    }

    /// `103 Early Hints` before the answer (RFC 8297): told as an event and to the
    /// delegate, its `link` field not taken for the final response's; `ferry get -v` shows
    /// it as `curl -v` does.
    @Test func earlyHintsAreToldAndNotTakenForTheAnswer() async throws {
        let delegate = InterimDelegate()
        try await withServer(delegate: delegate) { session, base, _ in
            let url = try #require(URL(string: base + "/early-hints?size=1000"))
            let task = session.dataTask(with: URLRequest(url: url))
            let seen = await Self.events(of: task)
            #expect(task.error == nil)
            let names = seen.map(\.name)
            let interim = try #require(names.firstIndex(of: "informationalResponse"), "\(names)")
            #expect(interim < (names.firstIndex(of: "response") ?? 0), "\(names)")
            guard case .informationalResponse(let hints) = seen[interim] else { return }
            #expect(hints.statusCode == 103)
            #expect(hints.headers["Link"] == "</style.css>; rel=preload; as=style")
            #expect(task.response?.statusCode == 200)
            #expect(task.response?.headers["Link"] == nil, "103's fields taken for the answer's")
            for _ in 0..<500 where delegate.heard.withLock({ $0.isEmpty }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(delegate.heard.withLock { $0.map(\.statusCode) } == [103])

            let ca = try #require(Self.caFile).path
            let out = try makeTemporaryDirectory("h2-hints-out").appendingPathComponent("body")
            let ours = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-v", "--cacert", ca, "-o", out.path, url.absoluteString]
            )
            let theirs = try await ProcessRunner.run(
                "/usr/bin/curl",
                ["-s", "-v", "--cacert", ca, "-o", out.path, url.absoluteString]
            )
            #expect(ours.status == 0, "\(ours.stderrText)")
            for line in ["< HTTP/2 103", "< link: </style.css>; rel=preload; as=style", "< HTTP/2 200"] {
                #expect(ours.stderrText.contains(line + "\n"), "ferry: \(line)\n\(ours.stderrText)")
                #expect(
                    theirs.stderrText.split(whereSeparator: \.isNewline).contains {
                        $0.trimmingCharacters(in: .whitespaces) == line
                    },
                    "curl: \(line)\n\(theirs.stderrText)"
                )
            }
        }
    }

    /// Padded frames, empty frames between, trailers and no `content-length`: each body
    /// whole and byte-identical, in memory and on disk.
    @Test func everyShapeOfDATAGivesTheWholeBody() async throws {
        try await withServer { session, base, _ in
            let size = 3 << 20
            let expected = HyperH2.body(size)
            for path in ["/padded", "/empty-between", "/trailers", "/plain"] {
                let (data, response) = try await session.data(from: try #require(URL(string: base + path)))
                #expect(response.httpVersion == "HTTP/2.0", "\(path)")
                #expect(response.statusCode == 200, "\(path)")
                #expect(data.count == size, "\(path)")
                #expect(data == expected, "\(path)")
            }
            let target = try makeTemporaryDirectory("h2-frames-out").appendingPathComponent("padded.bin")
            defer { try? FileManager.default.removeItem(at: target.deletingLastPathComponent()) }
            let url = try #require(URL(string: base + "/padded?size=5000000"))
            _ = try await session.download(from: url, to: .file(target))
            #expect(try Data(contentsOf: target) == HyperH2.body(5_000_000))
        }
    }

    /// A body shorter or longer than its `content-length` is a malformed response (RFC 9113
    /// §8.1.1): the call fails with `badServerResponse`, in bounded time, and the
    /// connection serves the next request.
    @Test func aBodyThatBreaksItsContentLengthFails() async throws {
        try await withServer { session, base, _ in
            for path in ["/short", "/long"] {
                let url = try #require(URL(string: base + path))
                do {
                    let (data, _) = try await session.data(from: url)
                    Issue.record("\(path) gave \(data.count) bytes")
                } catch let error as FerryError {
                    #expect(error.reason == .badServerResponse, "\(path): \(error)")
                }
            }
            let (data, _) = try await session.data(from: try #require(URL(string: base + "/plain?size=1000")))
            #expect(data == HyperH2.body(1000))
        }
    }

    /// `HEAD` answered with the body's `content-length` and no body: the length is the
    /// response's, not a short body.
    @Test func aHeadResponseHasNoBodyWhateverItsLength() async throws {
        try await withServer { session, base, _ in
            var request = URLRequest(url: try #require(URL(string: base + "/padded")))
            request.httpMethod = "HEAD"
            let (data, response) = try await session.data(for: request)
            #expect(data.isEmpty)
            #expect(response.expectedContentLength == 3 << 20)
        }
    }

    /// A server that sends past the stream's window, while its reader reads nothing, has
    /// that stream reset with `FLOW_CONTROL_ERROR` (RFC 9113 §6.9.1): the reader gets what
    /// was allowed, then `badServerResponse`; the connection's next request goes on.
    @Test func aServerThatIgnoresTheWindowLosesTheStream() async throws {
        try await withServer { session, base, server in
            let (bytes, response) = try await session.bytes(from: try #require(URL(string: base + "/overflow")))
            #expect(response.httpVersion == "HTTP/2.0")
            // FLOW_CONTROL_ERROR is 0x3 (§7).
            for _ in 0..<1_000 {
                if server.output.contains("reset 1 3") { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(server.output.contains("reset 1 3"), "\(server.output)")
            var received = 0
            do {
                for try await chunk in bytes.chunks { received += chunk.count }
                Issue.record("the overflow ended cleanly after \(received) bytes")
            } catch let error as FerryError {
                #expect(error.reason == .badServerResponse, "\(error)")
            }
            // At most what Ferry granted (§6.9.1): the stream's initial window and every
            // `WINDOW_UPDATE` increment, as the server saw them (sent before the reset).
            // Ferry grants again what leaves the connection's hands, so how much that is
            // depends on where the unread bytes wait (the sequence, the transfer, the read-ahead);
            // what it may never be is more than was granted, or all the server sent.
            let granted = server.output.split(separator: "\n")
                .filter { $0.hasPrefix("granted 1 ") }
                .compactMap { Int($0.dropFirst("granted 1 ".count)) }
                .reduce(0, +)
            #expect(granted >= 65_535, "\(server.output)")
            #expect(received <= granted, "more than the window Ferry granted")
            let sent = server.output.split(separator: "\n")
                .first { $0.hasPrefix("overflow 1 ") }
                .flatMap { Int($0.dropFirst("overflow 1 ".count)) }
            #expect(received < (try #require(sent, "\(server.output)")))
            let (data, _) = try await session.data(from: try #require(URL(string: base + "/padded?size=70000")))
            #expect(data == HyperH2.body(70000))
        }
    }
}
