import FerryServerSupport
public import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import Synchronization

/// A real HTTP/1.1 server on loopback for Ferry's tests: deterministic content of any size,
/// RFC 9110 ranges and validators, an upload sink, echo, redirects, Basic auth, slow drip,
/// and faults a test chooses per request.
///
/// Start one per test (it binds a free port), use ``baseURL``, and ``shutdown()`` at the end:
///
/// ```swift
/// let server = try await FerryTestServer.start()
/// defer { Task { try await server.shutdown() } }
/// let url = server.url("/bytes/1048576?seed=7")
/// ```
///
/// Routes are listed in `docs/TestServer.md`. The server counts concurrent connections per
/// client address (``connectionStats``) so tests can check per-host limits.
public final class FerryTestServer: Sendable {
    /// The port the server listens on.
    public let port: Int
    /// The address it listens on.
    /// `http`, or `https` for a server started with TLS.
    public let scheme: String
    public let host: String
    private let acceptor: ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>
    /// Open connections, closed by `shutdown()`; `nil` once shutting down.
    private let connections: Mutex<[ObjectIdentifier: any Channel]?> = Mutex([:])
    let stats = Mutex(ConnectionStats())
    let log = Mutex<[LoggedRequest]>([])
    let failures = Mutex<[String: Int]>([:])

    /// A request as the server received it, for tests that check what a client sent.
    public struct LoggedRequest: Sendable, Equatable {
        public var method: String
        public var uri: String
        /// Header fields, names lower-cased.
        public var headers: [String: String]
        /// When the server had read the request's head.
        public var receivedAt = Date()
    }

    let versions = Mutex<[String: (size: Int64, seed: UInt64)]>([:])

    /// Makes `/versioned/NAME` serve content of `size` bytes with `seed` (and the matching
    /// strong ETag) from now on: a resource that changes between a client's requests.
    public func setVersion(_ name: String, size: Int64, seed: UInt64) {
        versions.withLock { $0[name] = (size, seed) }
    }

    /// Every request received so far, in order.
    public var requests: [LoggedRequest] { log.withLock { $0 } }

    /// Requests whose URI path starts with `prefix`.
    public func requests(to prefix: String) -> [LoggedRequest] {
        requests.filter { $0.uri.hasPrefix(prefix) }
    }

    /// Connection counts seen by the server.
    public struct ConnectionStats: Sendable, Equatable {
        /// Connections open now.
        public var current = 0
        /// The most connections open at once since the last ``FerryTestServer/resetStats()``.
        public var peak = 0
        /// Connections accepted in all.
        public var total = 0
        /// Requests answered in all.
        public var requests = 0
        /// Per client address: connections open now and the most open at once.
        public var perClient: [String: PerClient] = [:]

        public struct PerClient: Sendable, Equatable {
            public var current = 0
            public var peak = 0
        }
    }

    private init(
        acceptor: ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>,
        host: String,
        port: Int,
        scheme: String
    ) {
        self.acceptor = acceptor
        self.host = host
        self.port = port
        self.scheme = scheme
    }

    /// The header by which a route asks for its response to be compressed.
    static let compressMarker = "X-Ferry-Compress"

    /// Starts a server on `host` and `port` (0 picks a free port); with `tls`, it speaks
    /// HTTPS with that identity, and with `clientCA` it asks for client certificates.
    public static func start(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls identity: TestPKI.Identity? = nil,
        requireClientCertificatesFrom clientCA: String? = nil
    ) async throws -> FerryTestServer {
        let tls = try identity.map {
            try NIOSSLContext(configuration: $0.serverConfiguration(requiringClientCertificatesFrom: clientCA))
        }
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
        let acceptor = try await ConnectionAcceptor<HTTPServerRequestPart, HTTPServerResponsePart>.bind(
            bootstrap,
            .host(host, port: port)
        ) { channel in
            if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
            try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
            // Compresses only responses marked by the /gzip route, and only for clients
            // that accept it.
            try channel.pipeline.syncOperations.addHandler(
                HTTPResponseCompressor(responseCompressionPredicate: { head, _ in
                    guard head.headers.contains(name: Self.compressMarker) else { return .doNotCompress }
                    head.headers.remove(name: Self.compressMarker)
                    return .compressIfPossible
                })
            )
            return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(
                wrappingChannelSynchronously: channel
            )
        }
        let server = FerryTestServer(
            acceptor: acceptor,
            host: host,
            port: acceptor.port,
            scheme: tls == nil ? "http" : "https"
        )
        acceptor.start { [weak server] connection in
            if let server {
                await server.serve(connection)
            } else {
                try? await connection.executeThenClose { _, _ in }
            }
        }
        return server
    }

    /// `http://host:port` (`https` with TLS).
    public var baseURL: URL { url("") }

    /// A URL on this server; `pathAndQuery` starts with `/`.
    ///
    /// Characters a URL cannot hold as they are (a space, non-ASCII letters) are
    /// percent-encoded, as a browser's address bar would; `%` escapes already there are kept.
    public func url(_ pathAndQuery: String) -> URL {
        let authority = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let base = "\(scheme)://\(authority)"
        if let url = URL(string: base + pathAndQuery) { return url }
        let encoded = pathAndQuery.addingPercentEncoding(withAllowedCharacters: Self.pathAndQueryCharacters) ?? ""
        if let url = URL(string: base + encoded) { return url }
        // Only a host no URL can name gets here (the server could not have listened there).
        var components = URLComponents()
        components.scheme = scheme
        components.host = host
        components.port = port
        return components.url ?? URL(fileURLWithPath: "/")
    }

    /// What a path and query may hold unescaped (RFC 3986's `pchar`, `/`, `?`, and `%` for
    /// escapes already made).
    private static let pathAndQueryCharacters = CharacterSet.urlPathAllowed.union(.urlQueryAllowed)
        .union(CharacterSet(charactersIn: "%?#"))

    /// Connection counts so far.
    public var connectionStats: ConnectionStats { stats.withLock { $0 } }

    /// Sets the peaks and totals back to the current counts.
    public func resetStats() {
        stats.withLock { stats in
            stats.peak = stats.current
            stats.total = 0
            stats.requests = 0
            for key in stats.perClient.keys { stats.perClient[key]!.peak = stats.perClient[key]!.current }
        }
    }

    /// Stops accepting, closes every connection, and waits until all are gone (every
    /// accepted channel is finished, as NIO requires; see ``ConnectionAcceptor``).
    public func shutdown() async {
        let open = connections.withLock { connections in
            defer { connections = nil }
            return connections.map { Array($0.values) } ?? []
        }
        for connection in open { connection.close(promise: nil) }
        await acceptor.close()
    }

    /// Runs until `shutdown()` or cancellation.
    public func run() async {
        await withTaskCancellationHandler {
            await acceptor.wait()
        } onCancel: {
            Task { await self.shutdown() }
        }
    }

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async {
        let client = connection.channel.remoteAddress?.ipAddress ?? "unknown"
        let id = ObjectIdentifier(connection.channel)
        let accepted = connections.withLock { connections in
            guard connections != nil else { return false }
            connections?[id] = connection.channel
            return true
        }
        guard accepted else {
            try? await connection.executeThenClose { _, _ in }
            return
        }
        defer { _ = connections.withLock { $0?.removeValue(forKey: id) } }
        stats.withLock { stats in
            stats.current += 1
            stats.total += 1
            stats.peak = max(stats.peak, stats.current)
            var entry = stats.perClient[client, default: .init()]
            entry.current += 1
            entry.peak = max(entry.peak, entry.current)
            stats.perClient[client] = entry
        }
        defer {
            stats.withLock { stats in
                stats.current -= 1
                stats.perClient[client]?.current -= 1
            }
        }
        do {
            try await connection.executeThenClose { inbound, outbound in
                var iterator = inbound.makeAsyncIterator()
                while let part = try await iterator.next() {
                    guard case .head(let head) = part else { continue }
                    if head.uri.hasPrefix("/early") {
                        // Answer before reading the body (a 413 or 401 sent early), then close.
                        try await Responder.early(head, outbound: outbound)
                        return
                    }
                    let request = try await RequestReader.read(head: head, from: &iterator)
                    stats.withLock { $0.requests += 1 }
                    log.withLock {
                        $0.append(
                            LoggedRequest(
                                method: head.method.rawValue,
                                uri: head.uri,
                                headers: Dictionary(
                                    head.headers.map { ($0.name.lowercased(), $0.value) },
                                    uniquingKeysWith: { first, second in first + ", " + second }
                                )
                            )
                        )
                    }
                    let keepOpen = try await Responder(server: self, request: request, outbound: outbound).respond()
                    if !keepOpen || !head.isKeepAlive { return }
                }
            }
        } catch {
            // The client went away or a fault closed the connection.
        }
    }
}
