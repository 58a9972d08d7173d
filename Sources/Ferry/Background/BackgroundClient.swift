import AsyncHTTPClient
package import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// Speaks the daemon's socket API (see `docs/DaemonProtocol.md`): what `ferry add`,
/// `ls`, `pause`, `resume`, `cancel` and `wait` use.
package struct BackgroundClient: Sendable {
    package let socket: URL

    package init(socket: URL) { self.socket = socket }

    /// One client for every daemon connection of the process. A socket nobody listens on
    /// fails at once (AsyncHTTPClient's shared client would retry connecting until the
    /// request's deadline), so the connect timeout only bounds a connection that is slow to
    /// be set up: 10 s, which a loaded machine stays well inside (2 s did not, once).
    private static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(10), read: .seconds(60)))
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: configuration)
    }()

    package func health() async throws -> Bool {
        await daemonPID() != nil
    }

    /// The daemon's process id, or `nil` when none answers.
    package func daemonPID() async -> Int32? {
        guard let data = try? await send("GET", "/v1/health"),
            let answer = try? BackgroundAPI.decoder.decode([String: Int32].self, from: data)
        else { return nil }
        return answer["pid"]
    }

    package func add(_ request: BackgroundAPI.AddTask) async throws -> BackgroundTaskRecord {
        try decode(BackgroundTaskRecord.self, try await send("POST", "/v1/tasks", body: request))
    }

    /// Adds `requests` in one request and one transaction (all or none); their ids come back
    /// in the order asked. At most ``BackgroundAPI/AddTasks/maximumCount`` at once.
    package func add(_ requests: [BackgroundAPI.AddTask]) async throws -> [Int64] {
        let batch = BackgroundAPI.AddTasks(tasks: requests)
        return try decode(BackgroundAPI.AddedTasks.self, try await send("POST", "/v1/tasks/batch", body: batch)).ids
    }

    /// A page of tasks (see `GET /v1/tasks` in `docs/DaemonProtocol.md`) and the totals.
    ///
    /// - Parameters:
    ///   - states: the states listed, in this order; `nil`: every state.
    ///   - after: where the previous page stopped (`STATE:ID` or `ID`); `nil`: from the start.
    ///   - limit: at most this many tasks.
    ///   - finishedSince: finished tasks only when they finished since then.
    package func page(
        session: String? = nil,
        states: [BackgroundTaskRecord.State]? = nil,
        after: String? = nil,
        limit: Int,
        finishedSince: Date? = nil
    ) async throws -> BackgroundAPI.TaskList {
        var items = ["limit=\(limit)"]
        if let session { items.append("session=\(session)") }
        if let states { items.append("state=" + states.map(\.rawValue).joined(separator: ",")) }
        if let after { items.append("after=\(after)") }
        if let finishedSince { items.append("finishedSince=" + BackgroundAPI.text(finishedSince)) }
        let target = "/v1/tasks?" + items.joined(separator: "&")
        return try decode(BackgroundAPI.TaskList.self, try await send("GET", target))
    }

    package func tasks(session: String? = nil) async throws -> [BackgroundTaskRecord] {
        let query = session.map { "?session=\($0)" } ?? ""
        return try decode(BackgroundAPI.TaskList.self, try await send("GET", "/v1/tasks\(query)")).tasks
    }

    package func task(_ id: Int64) async throws -> BackgroundTaskRecord {
        try decode(BackgroundTaskRecord.self, try await send("GET", "/v1/tasks/\(id)"))
    }

    /// `pause`, `resume` or `cancel`.
    package func perform(_ action: String, on id: Int64) async throws -> BackgroundTaskRecord {
        try decode(
            BackgroundTaskRecord.self,
            try await send("POST", "/v1/tasks/\(id)/\(action)", body: [String: String]())
        )
    }

    package func sessions() async throws -> [BackgroundAPI.SessionInfo] {
        try decode(BackgroundAPI.SessionList.self, try await send("GET", "/v1/sessions")).sessions
    }

    /// The events of `session` after `seq`; with a `wait`, the daemon answers as soon as
    /// there is one, or after `wait` with none (a long poll).
    package func events(
        session: String,
        after seq: Int64,
        wait: Duration = .zero
    ) async throws -> [BackgroundEventRecord] {
        let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000
        let target = "/v1/events?session=\(session)&after=\(seq)&wait=\(milliseconds)"
        return try decode(BackgroundAPI.EventList.self, try await send("GET", target)).events
    }

    package func acknowledge(session: String, through seq: Int64) async throws {
        _ = try await send("POST", "/v1/events/ack", body: BackgroundAPI.Acknowledge(session: session, through: seq))
    }

    /// Removes every finished task (of `session`, or of all): `ferry clean`. Returns how many.
    package func clean(session: String? = nil) async throws -> Int {
        let query = session.map { "?session=\($0)" } ?? ""
        return try decode([String: Int].self, try await send("POST", "/v1/clean\(query)", body: [String: String]()))[
            "removed"
        ] ?? 0
    }

    private func decode<Value: Decodable>(_ type: Value.Type, _ data: Data) throws -> Value {
        do {
            return try BackgroundAPI.decoder.decode(Value.self, from: data)
        } catch {
            throw FerryError(
                .badServerResponse,
                "The daemon's answer is not what this ferry expects.",
                underlying: error
            )
        }
    }

    /// One request; the body of a 2xx answer, or the daemon's error as a ``FerryError``.
    private func send(
        _ method: String,
        _ target: String,
        body: (some Encodable)? = [String: String]?.none
    ) async throws
        -> Data
    {
        guard let url = URL(httpURLWithSocketPath: socket.path, uri: target) else {
            throw FerryError(.invalidURL, "'\(socket.path)' cannot be used as a socket path.")
        }
        var request = HTTPClientRequest(url: url.absoluteString)
        request.method = NIOHTTP1.HTTPMethod(rawValue: method)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try BackgroundAPI.encoder.encode(body)))
        }
        try Self.checkPeer(at: socket.path)
        let response: HTTPClientResponse
        let bytes: ByteBuffer
        do {
            response = try await Self.http.execute(request, timeout: .seconds(60))
            bytes = try await response.body.collect(upTo: 16 << 20)
        } catch {
            throw FerryError(
                .network,
                "No daemon answers at \(socket.path); start one with `ferry daemon`.",
                underlying: error
            )
        }
        let data = Data(bytes.readableBytesView)
        guard (200..<300).contains(Int(response.status.code)) else {
            let failure = (try? BackgroundAPI.decoder.decode([String: BackgroundAPI.Failure].self, from: data))?[
                "error"
            ]
            throw FerryError(
                response.status.code < 500 ? .invalidRequest : .badServerResponse,
                failure?.message ?? "The daemon answered \(response.status.code)."
            )
        }
        return data
    }

    /// Refuses a socket whose listener runs as another user (`SO_PEERCRED`): requests carry
    /// paths and credentials, and answers are believed, so they go to this user's daemon
    /// only. A socket nobody listens on is left to the request, which says so.
    static func checkPeer(at path: String) throws {
        let descriptor = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
        guard connected else { return }
        var credentials = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            throw FileSystem.error("Cannot tell who listens on \(path)")
        }
        guard credentials.uid == geteuid() else {
            throw FerryError(
                .unsupportedConfiguration,
                "\(path) is served by another user (uid \(credentials.uid)), not by this user's daemon: refused."
            )
        }
    }
}

/// `struct ucred` (Linux), which Glibc's module does not export.
private struct PeerCredentials {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
