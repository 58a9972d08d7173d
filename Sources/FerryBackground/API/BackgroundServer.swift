import Ferry
import FerryServerSupport
package import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The daemon's socket API: HTTP/1.1 and JSON on a Unix domain socket that only its user
/// can open (the socket is mode 0600 in a directory of mode 0700).
///
/// ## Lifecycle and threading
/// ``start(daemon:socket:allowedDirectories:)`` binds and returns; connections are served
/// concurrently, each request read whole (at most ``BackgroundAPI/maximumBodySize(for:)``) and
/// answered by ``BackgroundRouter``. Nothing a client sends ends the server: malformed HTTP
/// closes that connection, bad requests get a JSON error. ``run()`` serves until
/// ``close()``.
package final class BackgroundServer: Sendable {
    private typealias Connection = NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>
    private let acceptor: ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>
    private let router: BackgroundRouter
    /// Where it listens: the socket's path, or the web interface's `http://host:port/`.
    package let socketPath: String
    /// The web interface's checks and page; `nil` on the socket.
    private let web: (gate: WebGate, page: WebPage)?
    /// The text `GET /metrics` answers on the web interface (Prometheus's format); `nil`:
    /// no metrics are served.
    private let metrics: (@Sendable () async -> String)?
    /// Open connections, closed by ``close()``; `nil` once closing.
    private let connections = Mutex<[ObjectIdentifier: any Channel]?>([:])

    private init(
        acceptor: ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>,
        router: BackgroundRouter,
        socketPath: String,
        web: (gate: WebGate, page: WebPage)? = nil,
        metrics: (@Sendable () async -> String)? = nil
    ) {
        self.acceptor = acceptor
        self.router = router
        self.socketPath = socketPath
        self.web = web
        self.metrics = metrics
    }

    /// Binds the socket at `socket` (replacing a stale one: the caller holds the daemon lock).
    package static func start(
        daemon: BackgroundDaemon,
        socket: URL,
        allowedDirectories: [URL]
    ) async throws -> BackgroundServer {
        try FileManager.default.createDirectory(
            at: socket.deletingLastPathComponent(),
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let acceptor = try await ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>.bind(
            ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton),
            // 0600 from its first moment, without the process-wide umask.
            .privateUnixSocket(socket.path)
        ) { channel in
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
            return try Connection(wrappingChannelSynchronously: channel)
        }
        chmod(socket.path, 0o600)
        let server = BackgroundServer(
            acceptor: acceptor,
            router: BackgroundRouter(daemon: daemon, allowedDirectories: allowedDirectories),
            socketPath: socket.path
        )
        acceptor.start { connection in await server.serve(connection) }
        return server
    }

    /// Starts the web interface on a loopback `host` and `port` (0: any free port): the page
    /// and the same API as the socket, behind ``WebGate``'s checks.
    ///
    /// - Parameters:
    ///   - daemon: the daemon the API drives.
    ///   - host: `127.0.0.1`, another 127/8 address, `::1` or `localhost`; nothing else.
    ///   - port: the TCP port, or 0 for one the kernel picks (``socketPath`` says which).
    ///   - token: the secret every request must carry.
    ///   - allowedDirectories: as for the socket.
    ///   - saveTo: the folder the page offers for new downloads.
    ///   - metrics: what `GET /metrics` answers (Prometheus's text format); `nil`: a 404.
    package static func startWeb(
        daemon: BackgroundDaemon,
        host: String,
        port: Int,
        token: String,
        allowedDirectories: [URL],
        saveTo: String,
        metrics: (@Sendable () async -> String)? = nil
    ) async throws -> BackgroundServer {
        guard WebAddress.isLoopback(host) else {
            throw FerryError(.unsupportedConfiguration, "The web interface listens only on loopback, not \(host).")
        }
        let bindHost = host.lowercased() == "localhost" ? "127.0.0.1" : host
        let acceptor = try await ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>.bind(
            ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1),
            .host(bindHost, port: port)
        ) { channel in
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
            return try Connection(wrappingChannelSynchronously: channel)
        }
        let bound = acceptor.port
        let server = BackgroundServer(
            acceptor: acceptor,
            // The web page is read by people: no password or signature of a URL in it.
            router: BackgroundRouter(daemon: daemon, allowedDirectories: allowedDirectories, redactsURLs: true),
            socketPath: WebAddress.url(host: host, port: bound),
            web: (WebGate(token: token, host: host, port: bound), WebPage(saveTo: saveTo)),
            metrics: metrics
        )
        acceptor.start { connection in await server.serve(connection) }
        return server
    }

    /// Serves until the socket is closed.
    package func run() async {
        await acceptor.wait()
    }

    /// Stops listening and closes every connection (a client's idle keep-alive connection
    /// must not hold the daemon up); the socket's file is removed.
    package func close() async {
        let open = connections.withLock { connections in
            defer { connections = nil }
            return connections.map { Array($0.values) } ?? []
        }
        for connection in open { connection.close(promise: nil) }
        await acceptor.close()
        if web == nil { unlink(socketPath) }
    }

    private func serve(_ connection: Connection) async {
        let id = ObjectIdentifier(connection.channel)
        let accepted = connections.withLock { connections in
            guard connections != nil else { return false }
            connections?[id] = connection.channel
            return true
        }
        defer { _ = connections.withLock { $0?.removeValue(forKey: id) } }
        guard accepted else {
            try? await connection.executeThenClose { _, _ in }
            return
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                var head: HTTPRequestHead?
                var body = ByteBuffer()
                for try await part in inbound {
                    switch part {
                    case .head(let next):
                        head = next
                        body.clear()
                    case .body(var chunk):
                        let limit = BackgroundAPI.maximumBodySize(for: head?.uri ?? "")
                        guard body.readableBytes + chunk.readableBytes <= limit else {
                            let failure = BackgroundAPI.Failure(
                                413,
                                "tooLarge",
                                "A request body may hold at most \(limit) bytes."
                            )
                            try await write(BackgroundRouter.failure(failure), keepAlive: false, to: outbound)
                            return
                        }
                        body.writeBuffer(&chunk)
                    case .end:
                        guard let request = head else { return }
                        let response = await respond(to: request, body: Data(body.readableBytesView))
                        try await write(response, keepAlive: request.isKeepAlive, to: outbound)
                        if !request.isKeepAlive { return }
                        head = nil
                    }
                }
            }
        } catch {
            // The client went away or sent something that is not HTTP.
        }
    }

    private func respond(to request: HTTPRequestHead, body: Data) async -> BackgroundRouter.Response {
        guard let web else {
            return await router.respond(method: request.method.rawValue, target: request.uri, body: body)
        }
        var response: BackgroundRouter.Response
        let headers = request.headers.map { (name: $0.name, value: $0.value) }
        switch web.gate.decide(method: request.method.rawValue, target: request.uri, headers: headers) {
        case .page:
            response = web.page.response
            response.headers.append(("Set-Cookie", web.gate.pageCookie))
        case .api:
            response = await router.respond(method: request.method.rawValue, target: request.uri, body: body)
        case .metrics:
            if let metrics {
                response = BackgroundRouter.Response(
                    status: 200,
                    body: Data(await metrics().utf8),
                    headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]
                )
            } else {
                response = BackgroundRouter.failure(BackgroundAPI.Failure(404, "notFound", "No metrics are served."))
            }
        case .refuse(let status, let code, let message):
            response = BackgroundRouter.failure(BackgroundAPI.Failure(status, code, message))
        }
        response.headers += WebPage.securityHeaders
        if request.method == .HEAD { response.body = Data() }
        return response
    }

    private func write(
        _ response: BackgroundRouter.Response,
        keepAlive: Bool,
        to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    ) async throws {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Length", value: "\(response.body.count)")
        if !response.body.isEmpty, !response.headers.contains(where: { $0.name == "Content-Type" }) {
            headers.add(name: "Content-Type", value: "application/json")
        }
        for field in response.headers { headers.add(name: field.name, value: field.value) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        let head = HTTPResponseHead(
            version: .http1_1,
            status: HTTPResponseStatus(statusCode: response.status),
            headers: headers
        )
        try await outbound.write(.head(head))
        if !response.body.isEmpty { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: response.body)))) }
        try await outbound.write(.end(nil))
    }
}
