import Crypto
import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// socat (Debian's package) as an echo server on a free loopback port: plain TCP, or TLS with
/// the given identity. Started and stopped by the test.
final class SocatEcho {
    static let binary = ["/usr/bin/socat", "/usr/local/bin/socat"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    /// Set by CI: these tests must run, not be skipped.
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_SOCAT"] == "1" }
    static var enabled: Bool { binary != nil || required }

    private let server: ServerProcess
    var port: Int { server.port }

    init(tls identity: TestPKI.Identity? = nil) async throws {
        let binary = try #require(Self.binary, "socat is not installed (apt-get install socat)")
        var listen = "TCP-LISTEN:PORT,bind=127.0.0.1,reuseaddr,fork"
        var files: [String: String] = [:]
        if let identity {
            files = ["cert.pem": identity.certificatePEM, "key.pem": identity.privateKeyPEM]
            listen = "OPENSSL-LISTEN:PORT,bind=127.0.0.1,reuseaddr,fork,cert=DIR/cert.pem,key=DIR/key.pem,verify=0"
        }
        // -t: after one direction ends, the other may still drain for 30 s.
        server = try await ServerProcess(binary, ["-t", "30", listen, "PIPE"], files: files)
    }

    func stop() { server.stop() }
}

/// Writes `size` bytes of test content in 64 KiB writes, then closes writing, while reading
/// everything that comes back until the end of input; returns the SHA-256 of what was read
/// and its length.
private func echo(_ size: Int, through task: StreamTask) async throws -> (count: Int, sha256: String) {
    async let written: Void = {
        var offset = 0
        while offset < size {
            let count = min(64 * 1024, size - offset)
            let chunk = TestContent.data(size: Int64(size), seed: 21, range: Int64(offset)..<Int64(offset + count))
            try await task.write(chunk, timeout: 30)
            offset += count
        }
        await task.closeWrite()
    }()
    var hasher = SHA256()
    var count = 0
    while true {
        let (data, atEOF) = try await task.read(minLength: 1, maxLength: 256 * 1024, timeout: 30)
        hasher.update(data: data)
        count += data.count
        if atEOF { break }
    }
    try await written
    return (count, hasher.finalize().map { String(format: "%02x", $0) }.joined())
}

@Suite("Stream tasks against socat", .serialized, .enabled(if: SocatEcho.enabled))
struct StreamTaskTests {
    @Test func aHundredMebibytesEchoByteIdenticalBothWays() async throws {
        let socat = try await SocatEcho()
        defer { socat.stop() }
        let session = try makeSession()
        let task = session.streamTask(withHostName: "127.0.0.1", port: socat.port)
        task.resume()
        let size = 100 << 20
        let (count, digest) = try await echo(size, through: task)
        #expect(count == size)
        #expect(digest == TestContent.sha256(size: Int64(size), seed: 21))
        #expect(task.countOfBytesSent == Int64(size))
        #expect(task.countOfBytesReceived == Int64(size))
        // Both directions are closed (ours by closeWrite, socat's after our end of input).
        await task.closeRead()
        #expect(await completion(of: task) == nil)
        #expect(task.state == .completed)
    }

    @Test func readsHonourTheirLengthsAndTimeouts() async throws {
        let socat = try await SocatEcho()
        defer { socat.stop() }
        let session = try makeSession()
        let task = session.streamTask(withHostName: "127.0.0.1", port: socat.port)
        task.resume()
        try await task.write(Data("hello, world".utf8), timeout: 10)
        let (first, firstEOF) = try await task.read(minLength: 5, maxLength: 5, timeout: 10)
        #expect(String(decoding: first, as: UTF8.self) == "hello")
        #expect(!firstEOF)
        let (rest, _) = try await task.read(minLength: 7, maxLength: 100, timeout: 10)
        #expect(String(decoding: rest, as: UTF8.self) == ", world")
        // Nothing more comes: the read times out, and the stream goes on.
        await #expect {
            _ = try await task.read(minLength: 1, maxLength: 10, timeout: 0.2)
        } throws: { error in
            (error as? FerryError)?.reason == .timedOut(.idle)
        }
        try await task.write(Data("again".utf8), timeout: 10)
        let (again, _) = try await task.read(minLength: 5, maxLength: 5, timeout: 10)
        #expect(again == Data("again".utf8))
        task.cancel()
        #expect(await completion(of: task)?.reason == .cancelled)
    }

    @Test func startSecureConnectionVerifiesTheServerAndEchoesOverTLS() async throws {
        let ca = try TestPKI(name: "Ferry stream CA \(UUID().uuidString.prefix(8))")
        let identity = try ca.issueServerIdentity(for: ["127.0.0.1", "localhost"])
        let socat = try await SocatEcho(tls: identity)
        defer { socat.stop() }

        let trusting = try makeSession { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
        let task = trusting.streamTask(withHostName: "localhost", port: socat.port)
        task.resume()
        try await task.startSecureConnection()
        let size = 100 << 20
        let (count, digest) = try await echo(size, through: task)
        #expect(count == size)
        #expect(digest == TestContent.sha256(size: Int64(size), seed: 21))

        // A server whose certificate leads to no trusted root is refused.
        let otherRoot = try TestPKI(name: "other").certificatePEM
        let stranger = try makeSession { $0.tls.trustRoots = .custom(pem: otherRoot) }
        let refused = stranger.streamTask(withHostName: "localhost", port: socat.port)
        refused.resume()
        await #expect {
            try await refused.startSecureConnection()
        } throws: { error in
            (error as? FerryError)?.reason == .secureConnectionFailed
        }
    }

    /// `streamTask(withHostName:port:)` connected straight to the host whatever the session
    /// said. It now goes as the session's requests go: through an HTTP proxy's `CONNECT`
    /// tunnel (tinyproxy) or SOCKS5 (microsocks), with TLS started over the tunnel; a host on
    /// the proxy's bypass list is reached directly.
    @Test(.enabled(if: Tinyproxy.enabled && Microsocks.enabled))
    func aStreamTaskGoesThroughTheSessionsProxy() async throws {
        let ca = try TestPKI(name: "Ferry proxied stream CA \(UUID().uuidString.prefix(8))")
        let socat = try await SocatEcho(tls: try ca.issueServerIdentity(for: ["127.0.0.1", "localhost"]))
        defer { socat.stop() }
        let tinyproxy = try await Tinyproxy()
        defer { tinyproxy.stop() }
        let socks = try await Microsocks(user: nil, password: nil)
        defer { socks.stop() }
        let proxies: [(Proxy, Int)] = [
            (.http(host: "127.0.0.1", port: tinyproxy.port), tinyproxy.port),
            (.socks5(host: "127.0.0.1", port: socks.port), socks.port),
            (.http(host: "127.0.0.1", port: tinyproxy.port, bypass: ["localhost"]), tinyproxy.port),
        ]
        for (proxy, proxyPort) in proxies {
            let bypassed = !proxy.bypass.isEmpty
            let before = establishedConnections(toPort: proxyPort)
            let session = try makeSession {
                $0.proxy = proxy
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
            }
            let task = session.streamTask(withHostName: "localhost", port: socat.port)
            task.resume()
            try await task.startSecureConnection()
            // While the stream is open, its connection is the proxy's (none when bypassed).
            if bypassed {
                #expect(establishedConnections(toPort: proxyPort) == before)
            } else {
                #expect(await establishedConnections(toPort: proxyPort, atLeast: before + 1), "\(proxy.kind)")
            }
            // A mebibyte each way over TLS. (Not ended by closing our side: tinyproxy closes
            // both directions of a tunnel when one ends.)
            let sent = TestContent.data(size: 1 << 20, seed: 22, range: 0..<(1 << 20))
            async let written: Void = task.write(sent, timeout: 30)
            var echoed = Data()
            while echoed.count < sent.count {
                let (data, atEOF) = try await task.read(minLength: 1, maxLength: 256 * 1024, timeout: 30)
                echoed += data
                if atEOF { break }
            }
            try await written
            #expect(echoed == sent, "\(proxy.kind), bypassed: \(bypassed)")
            // Cancelling closes at once: before, TLS sent `close_notify` and waited its 5 s
            // shutdown timeout for socat's, which never comes while socat's other side is open.
            task.cancel()
            let ended = await finishing(within: 4) { await completion(of: task) }
            #expect(ended??.reason == .cancelled, "\(proxy.kind), bypassed: \(bypassed)")
        }
    }

    /// STARTTLS, a line over TLS, then TLS stopped in order and plaintext again, against
    /// Python's ssl module (OpenSSL) on the other side.
    @Test func tlsStartsAndStopsInTheMiddleOfTheStream() async throws {
        let (server, ca) = try await Self.startTLSEcho()
        defer { server.stop() }
        let session = try makeSession { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
        let task = session.streamTask(withHostName: "localhost", port: server.port)
        task.resume()
        try await task.write(Data("STARTTLS\r\n".utf8), timeout: 10)
        let (go, _) = try await task.read(minLength: 8, maxLength: 8, timeout: 10)
        #expect(go == Data("220 go\r\n".utf8))
        try await task.startSecureConnection()
        try await task.write(Data("a secret line\r\n".utf8), timeout: 10)
        let (echo, _) = try await task.read(minLength: 15, maxLength: 15, timeout: 10)
        #expect(echo == Data("a secret line\r\n".utf8))
        try await task.stopSecureConnection()
        var plain = Data()
        while true {
            let (data, atEOF) = try await task.read(minLength: 1, maxLength: 100, timeout: 10)
            plain += data
            if atEOF { break }
        }
        #expect(plain == Data("plain again\r\n".utf8))
        await #expect {
            try await task.stopSecureConnection()
        } throws: { error in
            (error as? FerryError)?.reason == .invalidRequest
        }
    }

    /// A peer that never answers `close_notify`: `stopSecureConnection()` ends with
    /// `.timedOut` at the session's timeout (1 s) or at TLS's own close timeout (5 s, in a
    /// session that would wait an hour), or with `.cancelled` when its Swift task is
    /// cancelled; the task ends with the connection. Before, each came back at TLS's 5 s as a
    /// `.network` failure, whatever the session's timeout or the caller's cancellation.
    @Test(arguments: ["timeout", "tls-timeout", "cancel"])
    func stopSecureConnectionComesBackWhenThePeerNeverAnswers(ending: String) async throws {
        let (server, ca) = try await Self.startTLSEcho(mode: ["ignore-close"])
        defer { server.stop() }
        let session = try makeSession {
            $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
            $0.timeoutIntervalForRequest = ending == "timeout" ? 1 : 3600
        }
        defer { session.invalidateAndCancel() }
        let task = session.streamTask(withHostName: "localhost", port: server.port)
        task.resume()
        try await task.write(Data("STARTTLS\r\n".utf8), timeout: 10)
        _ = try await task.read(minLength: 8, maxLength: 8, timeout: 10)
        try await task.startSecureConnection()
        try await task.write(Data("a line\r\n".utf8), timeout: 10)
        _ = try await task.read(minLength: 8, maxLength: 8, timeout: 10)
        // The reads and writes above were in the session's timeout too: its clock starts here.
        let stopping = Task { await thrownError { try await task.stopSecureConnection() } as? FerryError }
        if ending == "cancel" {
            // Waiting for the peer's close_notify, which never comes: cancelled at any point
            // from here, the call must come back.
            stopping.cancel()
        }
        let error = await finishing(within: 60) { await stopping.value }
        #expect(error??.reason == (ending == "cancel" ? .cancelled : .timedOut(.idle)), "\(String(describing: error))")
        let ended = await finishing(within: 60) { await completion(of: task) }
        #expect(ended != nil, "the task ended with its connection")
    }

    /// Support/starttls_echo.py (Python's ssl) with a certificate from a CA of its own, in
    /// `mode` (its optional last argument); and the CA.
    private static func startTLSEcho(mode: [String] = []) async throws -> (ServerProcess, TestPKI) {
        let ca = try TestPKI(name: "Ferry STARTTLS CA \(UUID().uuidString.prefix(8))")
        let identity = try ca.issueServerIdentity(for: ["127.0.0.1", "localhost"])
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Support/starttls_echo.py")
        let server = try await ServerProcess(
            "/usr/bin/env",
            ["python3", script.path, "PORT", "DIR/cert.pem", "DIR/key.pem"] + mode,
            files: ["cert.pem": identity.certificatePEM, "key.pem": identity.privateKeyPEM]
        )
        return (server, ca)
    }

    @Test func aRefusedConnectionFailsTheTaskAndItsReads() async throws {
        let port = try closedPort()
        let session = try makeSession()
        let task = session.streamTask(withHostName: "127.0.0.1", port: port)
        task.resume()
        await #expect {
            _ = try await task.read(minLength: 1, maxLength: 10, timeout: 10)
        } throws: { error in
            (error as? FerryError)?.reason == .network
        }
        #expect(await completion(of: task)?.reason == .network)
        let invalid = session.streamTask(withHostName: "127.0.0.1", port: 0)
        #expect(await completion(of: invalid)?.reason == .invalidURL)
    }
}
