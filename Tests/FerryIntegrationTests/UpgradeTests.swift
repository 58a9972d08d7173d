import Ferry
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Hands over the stream task a data task became, as the delegate hears of it.
private final class StreamCatcher: SessionDelegate {
    let (streams, continuation) = AsyncStream.makeStream(of: StreamTask.self)
    func session(_ session: Session, dataTask: DataTask, didBecome streamTask: StreamTask) {
        continuation.yield(streamTask)
    }

    /// The first stream task the delegate was given.
    func first() async -> StreamTask? {
        for await stream in streams { return stream }
        return nil
    }
}

enum WebSocketEcho {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/ws_echo.py")
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_WEBSOCKETS"] == "1" }
    static let isAvailable = pythonCanImport("websockets.sync.server")
    static var enabled: Bool { isAvailable || required }

    /// Starts `ws_echo.py` on a free port, with its `options` (see the script).
    static func start(_ options: [String] = []) async throws -> ServerProcess {
        try await ServerProcess("/usr/bin/env", ["python3", script.path, "PORT"] + options)
    }

    /// A GET asking `127.0.0.1:port` to upgrade to a WebSocket, with RFC 6455's example key.
    static func upgradeRequest(port: Int) -> URLRequest {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)/")!)
        request.setValue("websocket", forHTTPHeaderField: "Upgrade")
        request.setValue("Upgrade", forHTTPHeaderField: "Connection")
        request.setValue("dGhlIHNhbXBsZSBub25jZQ==", forHTTPHeaderField: "Sec-WebSocket-Key")
        request.setValue("13", forHTTPHeaderField: "Sec-WebSocket-Version")
        return request
    }

    /// One masked text frame (RFC 6455 §5.2), as a client must send it.
    static func frame(_ text: String) -> Data {
        let payload = Array(text.utf8)
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        return Data(
            [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        )
    }
}

@Suite("Upgrade to a stream task: 101 from websockets (PyPI)", .serialized, .enabled(if: WebSocketEcho.enabled))
struct UpgradeTests {
    @Test func a101TurnsTheDataTaskIntoARunningStreamTask() async throws {
        let server = try await WebSocketEcho.start()
        defer { server.stop() }
        let delegate = StreamCatcher()
        let session = try makeSession(delegate: delegate)
        let request = WebSocketEcho.upgradeRequest(port: server.port)
        let task = session.dataTask(with: request)
        let seen = await resumeCollectingEvents(task)
        #expect(task.error == nil)
        #expect(task.response?.statusCode == 101)
        // RFC 6455's own example key and answer.
        #expect(task.response?.headers["Sec-WebSocket-Accept"] == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(seen.map(\.name).contains("becameStreamTask"))
        let stream = try #require(await delegate.first())
        guard case .becameStreamTask(let announced) = seen.first(where: { $0.name == "becameStreamTask" }) else {
            Issue.record("no becameStreamTask event")
            return
        }
        #expect(announced === stream)
        #expect(stream.state == .running)

        try await stream.write(WebSocketEcho.frame("hello, websockets"), timeout: 10)
        let (echo, _) = try await stream.read(minLength: 19, maxLength: 19, timeout: 10)
        #expect(echo == Data([0x81, 17] + Array("hello, websockets".utf8)))
        stream.cancel()
        #expect(await completion(of: stream)?.reason == .cancelled)
    }

    /// The session stops taking tasks while the upgrade is answered: no stream task is
    /// made, the data task fails with the reason, and the connection is closed (it used to
    /// stay open, adopted by a stream task the session had refused).
    @Test func anUpgradeAnsweredAfterTheSessionWasInvalidatedClosesItsConnection() async throws {
        let server = try await WebSocketEcho.start()
        defer { server.stop() }
        let session = try makeSession()
        let request = WebSocketEcho.upgradeRequest(port: server.port)
        let task = session.dataTask(with: request)
        let events = task.events
        task.resume()
        session.finishTasksAndInvalidate()
        let seen = await collectEvents(events)
        #expect(task.error?.reason == .sessionInvalidated, "\(String(describing: task.error))")
        #expect(!seen.map(\.name).contains("becameStreamTask"))
        // The upgrade's connection is closed (waited for, as a close is asynchronous; the
        // bound is a ceiling).
        var open = establishedConnections(toPort: server.port)
        for _ in 0..<400 where open > 0 {
            try await Task.sleep(for: .milliseconds(25))
            open = establishedConnections(toPort: server.port)
        }
        #expect(open == 0, "\(open) connections to the server still open")
    }

    @Test func aRefusedUpgradeIsAnOrdinaryResponseWithItsBody() async throws {
        let server = try await WebSocketEcho.start()
        defer { server.stop() }
        let session = try makeSession()
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)/")!)
        request.setValue("websocket", forHTTPHeaderField: "Upgrade")
        request.setValue("Upgrade", forHTTPHeaderField: "Connection")
        // No Sec-WebSocket-Key: the server refuses with a 400 and says why in the body.
        let (body, response) = try await session.data(for: request)
        #expect(response.statusCode == 400)
        #expect(String(decoding: body, as: UTF8.self).contains("Sec-WebSocket-Key"))
    }
}

@Suite("CONNECT to a stream task through tinyproxy", .serialized, .enabled(if: Tinyproxy.enabled && SocatEcho.enabled))
struct ConnectTunnelTests {
    @Test func aConnectThroughTheProxyBecomesAStreamToTheTarget() async throws {
        let proxy = try await Tinyproxy()
        defer { proxy.stop() }
        let echo = try await SocatEcho()
        defer { echo.stop() }
        let delegate = StreamCatcher()
        let session = try makeSession(delegate: delegate) { $0.proxy = .http(host: "127.0.0.1", port: proxy.port) }
        let target = URL(string: "http://127.0.0.1:\(echo.port)")!
        let (body, response) = try await session.data(for: URLRequest(url: target, method: .connect))
        #expect(response.statusCode == 200)
        #expect(body.isEmpty)
        let stream = try #require(await delegate.first())
        try await stream.write(Data("through the tunnel".utf8), timeout: 10)
        let (bytes, _) = try await stream.read(minLength: 18, maxLength: 18, timeout: 10)
        #expect(String(decoding: bytes, as: UTF8.self) == "through the tunnel")
        stream.cancel()

        // A CONNECT the proxy refuses (nothing listens there) is its error response.
        let closed = URL(string: "http://127.0.0.1:\(try closedPort())")!
        let (_, refused) = try await session.data(for: URLRequest(url: closed, method: .connect))
        #expect(refused.statusCode >= 500)

        // Without a proxy, a CONNECT has nowhere to go.
        let direct = try makeSession()
        await #expect {
            _ = try await direct.data(for: URLRequest(url: target, method: .connect))
        } throws: { error in
            (error as? FerryError)?.reason == .unsupportedConfiguration
        }
    }
}

/// tinyproxy (Debian's package), an HTTP proxy nobody here wrote.
final class Tinyproxy {
    static let binary = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_TINYPROXY"] == "1" }
    static var enabled: Bool { binary != nil || required }

    private let server: ServerProcess
    var port: Int { server.port }

    init() async throws {
        let binary = try #require(Self.binary, "tinyproxy is not installed (apt-get install tinyproxy)")
        // No ConnectPort line: CONNECT may reach any port (the echo server's).
        let configuration = """
            Port PORT
            Listen 127.0.0.1
            Timeout 60
            Allow 127.0.0.1
            MaxClients 20
            \(geteuid() == 0 ? "User nobody\nGroup nogroup" : "")
            """
        server = try await ServerProcess(
            binary,
            ["-d", "-c", "DIR/tinyproxy.conf"],
            files: ["tinyproxy.conf": configuration]
        )
    }

    func stop() { server.stop() }
}
