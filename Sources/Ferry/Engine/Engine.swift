import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization
import Tracing

/// The transport of one session: an AsyncHTTPClient configured for Ferry, and the per-host
/// limiter that decides when a request may use it.
///
/// AsyncHTTPClient's own redirect handling and decompression are off: Ferry follows
/// redirects itself (per-task policy, delegate, origin rules), and downloads need the encoded
/// bytes. The pool's per-host soft limit equals the session's limit, so the connections the
/// pool opens match the tasks the limiter lets through.
final class Engine: Sendable {
    /// Clients by whether they go through ``SessionConfiguration/proxy`` and whether they
    /// decode `Content-Encoding` (data and upload tasks with
    /// ``SessionConfiguration/automaticDecompression``); only the combinations the
    /// configuration can use exist.
    private let clients: [ClientKind: HTTPClient]
    /// Direct, not decoding: every configuration has it.
    private let direct: HTTPClient

    struct ClientKind: Hashable {
        var proxied: Bool
        var decompressing: Bool
    }
    /// The per-host limit: transfers hold its slots through a ``HostLimiter/Lease``, from
    /// before they open files until they end, released while they sleep before a retry.
    let limiter: HostLimiter
    /// ``SessionConfiguration/maximumBytesPerSecond``, shared by every transfer.
    let rateLimiter: RateLimiter?
    let watchdog: Watchdog
    /// Trust and identity for https (pinned hosts get their own configuration per request).
    let tls: ResolvedTLS
    /// Carries requests to the hosts Ferry verifies itself, when the TLS options have any.
    let bridge: TLSBridge?
    /// The bridge an upgrade through a proxy uses when the session has no ``bridge`` (a
    /// SOCKS5 proxy without a credential, which AsyncHTTPClient speaks itself): made on first
    /// use (see ``streamRoute(for:)``).
    let streamBridge = Mutex<TLSBridge?>(nil)
    let configuration: SessionConfiguration
    /// The event loops of the clients' group, for ``eventLoop(for:)``.
    private let eventLoops: [any EventLoop] = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
    /// Whose turn it is among ``eventLoops`` for concurrent requests to one origin.
    private let loopTurn = Atomic<Int>(0)
    /// Origins that answered over HTTP/2, for ``pinsConnection(for:)``.
    private let multiplexedOrigins = Mutex<Set<Origin>>([])
    /// Clients made on first use, each with a pool of its own (see
    /// ``client(for:decompressing:bridged:connection:connectLimit:)``): for a segmented
    /// download's further connections to an HTTP/2 origin, and for requests that may take
    /// longer to connect than the session allows.
    private let madeClients = Mutex<[MadeClient: HTTPClient]>([:])

    /// Ferry's own HTTP/2 connections, for the requests ``execute(_:onActivity:)`` sends
    /// over them; `nil` when the session does not offer HTTP/2.
    let http2: HTTP2Pool?

    struct MadeClient: Hashable {
        var kind: ClientKind
        /// A segmented download's connection (1 and up), or 0.
        var connection: Int
        /// ``connectLimit(covering:)``, or `nil` for the session's.
        var connectLimit: Int?
    }

    /// - Throws: when the TLS bridge the options need cannot be set up.
    convenience init(configuration: SessionConfiguration, tls: ResolvedTLS) throws(FerryError) {
        let bridge = try tls.evaluator.map { evaluator throws(FerryError) in
            try Self.makeBridge(evaluator, configuration)
        }
        self.init(configuration: configuration, tls: tls, bridge: bridge)
    }

    /// A ``TLSBridge`` for `configuration`'s proxy and timeout, verifying with `evaluator`.
    static func makeBridge(
        _ evaluator: TrustEvaluator,
        _ configuration: SessionConfiguration
    ) throws(FerryError) -> TLSBridge {
        do {
            return try TLSBridge(
                evaluator: evaluator,
                proxy: configuration.proxy,
                connectTimeout: Self.connectTimeout(seconds: configuration.timeoutIntervalForRequest)
            )
        } catch {
            throw FerryError(
                .unsupportedConfiguration,
                "The TLS options cannot be used for verified connections.",
                underlying: error
            )
        }
    }

    init(configuration: SessionConfiguration, tls: ResolvedTLS, bridge: TLSBridge?) {
        self.configuration = configuration
        self.tls = tls
        self.bridge = bridge
        let direct = Self.makeClient(configuration, tls: tls, proxy: nil, decompressing: false)
        var clients: [ClientKind: HTTPClient] = [ClientKind(proxied: false, decompressing: false): direct]
        for proxied in configuration.proxy == nil ? [false] : [false, true] {
            for decompressing in configuration.automaticDecompression ? [false, true] : [false]
            where proxied || decompressing {
                clients[ClientKind(proxied: proxied, decompressing: decompressing)] = Self.makeClient(
                    configuration,
                    tls: tls,
                    proxy: proxied ? configuration.proxy : nil,
                    decompressing: decompressing
                )
            }
        }
        self.clients = clients
        self.direct = direct
        limiter = HostLimiter(limit: configuration.httpMaximumConnectionsPerHost)
        http2 =
            configuration.tls.offersHTTP2
            ? HTTP2Pool(
                tls: tls,
                maximumConnections: configuration.http2MaximumConnectionsPerHost
                    ?? configuration.httpMaximumConnectionsPerHost,
                connectTimeout: Self.connectTimeout(seconds: configuration.timeoutIntervalForRequest),
                idleTimeout: .milliseconds(Int64(configuration.connectionIdleTimeout * 1000))
            ) : nil
        rateLimiter = configuration.maximumBytesPerSecond.map { RateLimiter(bytesPerSecond: $0) }
        watchdog = Watchdog(
            idle: configuration.timeoutIntervalForRequest,
            resource: configuration.timeoutIntervalForResource
        )
    }

    private static func makeClient(
        _ configuration: SessionConfiguration,
        tls: ResolvedTLS,
        proxy: Proxy?,
        decompressing: Bool,
        connectLimit: Int? = nil
    ) -> HTTPClient {
        var clientConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: connectTimeout(
                    seconds: connectLimit.map(TimeInterval.init) ?? configuration.timeoutIntervalForRequest
                )
            ),
            connectionPool: .init(
                idleTimeout: .milliseconds(Int64(configuration.connectionIdleTimeout * 1000)),
                concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.httpMaximumConnectionsPerHost
            ),
            // A decoded body may not outgrow a data task's maximumInMemoryBodySize: a "zip
            // bomb" fails while it inflates, whatever its ratio.
            decompression: decompressing
                ? .enabled(limit: .size(Int(clamping: configuration.maximumInMemoryBodySize))) : .disabled
        )
        // .automatic offers h2 and http/1.1 in ALPN; .http1Only offers http/1.1 alone.
        clientConfiguration.httpVersion = configuration.tls.offersHTTP2 ? .automatic : .http1Only
        // A refused or failed connection fails the request at once, as URLSession does;
        // retrying is the retry policy's decision, not the pool's.
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        // Ferry makes the spans itself (a task's, and each of its requests', TaskTelemetry):
        // AsyncHTTPClient's own per-request span would be a second, parentless one, and it
        // cost 6 % of a small GET's samples in perf even for a no-op tracer.
        clientConfiguration.tracing.tracer = nil
        if let base = tls.base { clientConfiguration.tlsConfiguration = base }
        switch proxy?.kind {
        case .http?:
            let authorization = proxy?.credential.map {
                HTTPClient.Authorization.basic(username: $0.user, password: $0.password)
            }
            clientConfiguration.proxy = proxy.map {
                .server(host: $0.host, port: $0.port, authorization: authorization)
            }
        case .socks5?:
            clientConfiguration.proxy = proxy.map { .socksServer(host: $0.host, port: $0.port) }
        case nil, .https?:
            // An https proxy never gets here: the configuration refuses it.
            break
        }
        return HTTPClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: clientConfiguration)
    }

    /// A connection's time limit in NIO's terms: `seconds`, at least a millisecond and at
    /// most an hour.
    static func connectTimeout(seconds: TimeInterval) -> TimeAmount {
        .milliseconds(max(1, Int64(min(seconds, 3600) * 1000)))
    }

    /// How long a request whose idle timeout is `idleTimeout` may take to connect, when the
    /// session's limit (``SessionConfiguration/timeoutIntervalForRequest``) is shorter: the
    /// smallest power of two seconds that covers it, at most 4,096 (which
    /// ``connectTimeout(seconds:)`` makes an hour, as it does every limit); `nil` when the
    /// session's limit covers it.
    ///
    /// A request's own `timeoutInterval` replaces the session's, and connecting is part of
    /// the wait it bounds, as in URLSession. The watchdog ends the request at its own timeout
    /// however long the connection may take; the limit only has to be no shorter. Powers of
    /// two keep the clients and listeners made for such requests few, whatever intervals
    /// they ask for. A shorter request needs nothing: the watchdog ends it first.
    func connectLimit(covering idleTimeout: TimeInterval) -> Int? {
        guard idleTimeout > configuration.timeoutIntervalForRequest else { return nil }
        var limit = 1
        while TimeInterval(limit) < idleTimeout, limit < 4096 { limit *= 2 }
        return limit
    }

    /// What AsyncHTTPClient is given for a request to `url`: the URL, or the TLS bridge's
    /// socket with the `Host` field to send (see ``TLSBridge``), whose connections to the
    /// origin get `connectLimit` seconds (``connectLimit(covering:)``; the session's when `nil`).
    func route(_ url: URL, connectLimit: Int? = nil) async throws -> (url: URL, host: String?, bridged: Bool) {
        // Through an HTTP proxy too: the bridge makes the CONNECT, so a 407's challenge can
        // be answered (AsyncHTTPClient's own CONNECT fails on it); and through a SOCKS5 proxy
        // with a credential (AsyncHTTPClient's SOCKS offers no authentication).
        let proxied = configuration.proxy.map { $0.isBridged && $0.applies(to: url) } ?? false
        guard let bridge, bridge.evaluator.bridges(url) || proxied else { return (url, nil, false) }
        let (routed, host) = try await bridge.route(url, connectLimit: connectLimit)
        return (routed, host, true)
    }

    /// The event loop a request to `origin` runs its delegate on, and where the pool prefers
    /// its connection: the origin's own loop while the request is the origin's only one,
    /// the next loop in turn while others to that origin run.
    ///
    /// AsyncHTTPClient calls a request's delegate on the request's event loop, and hops
    /// there (a thread switch for each callback) whenever the pooled connection it got lives
    /// on another. With `.indifferent`, the request's loop is the group's next, so
    /// sequential requests on one keep-alive connection hopped every other time: a fifth of
    /// Ferry's extra time per small GET in perf. The origin's own loop keeps a request, its
    /// connection and its callbacks on one thread; taking turns keeps concurrent transfers
    /// to one host (many files, segments) spread over the group as before.
    func eventLoop(for origin: Origin) -> any EventLoop {
        let own = Int(UInt(bitPattern: origin.hashValue) % UInt(eventLoops.count))
        guard limiter.running(for: origin) > 1 else { return eventLoops[own] }
        let turn = Int(UInt(bitPattern: loopTurn.wrappingAdd(1, ordering: .relaxed).oldValue) % UInt(eventLoops.count))
        return eventLoops[(own + turn) % eventLoops.count]
    }

    /// How far a response from `origin` is read ahead: ``ResponseStream/readAhead``
    /// shared by the origin's running transfers (segments and many files at once need no
    /// more buffer in all than one download alone: the connections are the limit, not the
    /// disk), never under ``ResponseStream/minimumReadAhead``. Eight segments held up to
    /// 8 MiB; now 2 MiB.
    func readAhead(for origin: Origin) -> Int {
        ResponseStream.readAhead / max(1, limiter.running(for: origin))
    }

    /// Whether a request to `origin` asks the pool for a connection on its own event loop
    /// (`.delegateAndChannel`) rather than only preferring one: for concurrent requests to an
    /// origin that has answered over HTTP/2.
    ///
    /// AsyncHTTPClient multiplexes an origin's HTTP/2 requests over one connection, whose
    /// event loop then does the TLS, framing and stream pipelines of all of them (1,000 files
    /// of 64 KiB, six at a time: that one thread saturated, the other idle), and hops every
    /// callback of the requests whose delegate lives on the other loop. Pinned, the pool
    /// opens one connection per loop and each request stays on its own. HTTP/1 requests are
    /// never pinned: the pool would open connections beyond the per-host limit for them.
    func pinsConnection(for origin: Origin) -> Bool {
        limiter.running(for: origin) > 1 && multiplexedOrigins.withLock { $0.contains(origin) }
    }

    /// Records the protocol `origin` answered with (see ``pinsConnection(for:)``): an
    /// origin that answers over HTTP/1 again is no longer pinned.
    func noteVersion(_ version: HTTPVersion, of origin: Origin) {
        multiplexedOrigins.withLock { origins in
            if version.major >= 2 { _ = origins.insert(origin) } else { _ = origins.remove(origin) }
        }
    }

    /// The client for a request to `url`: through the session's proxy unless it bypasses it;
    /// decoding the body when asked and the configuration allows it.
    ///
    /// A segmented download asks for several connections (aria2c's `-s`), and over HTTP/1.1
    /// the pool gives each concurrent request one. Over HTTP/2 it would multiplex them all
    /// on one connection (one per event loop when pinned), which gains nothing from a server
    /// or a path that limits each connection. So the download's further connections
    /// (`connection` 1 and up) to an origin that has answered over HTTP/2 each go through a
    /// client of their own, whose pool opens a connection of its own; how many is bounded by
    /// the download's connections, and those by the per-host limit.
    ///
    /// A request that may take `connectLimit` seconds to connect (``connectLimit(covering:)``)
    /// goes through a client with that connect timeout, one per limit; a bridged one does not
    /// need it (its socket is local; the bridge's connection to the origin has the limit).
    /// Every other request uses the session's clients and shares their connections.
    func client(
        for url: URL,
        decompressing: Bool,
        bridged: Bool = false,
        connection: Int = 0,
        connectLimit: Int? = nil
    ) -> HTTPClient {
        let kind = ClientKind(
            proxied: !bridged && configuration.proxy?.applies(to: url) == true,
            decompressing: decompressing && configuration.automaticDecompression
        )
        let separate = connection > 0 && !bridged && multiplexedOrigins.withLock { $0.contains(Origin(url)) }
        let limit = bridged ? nil : connectLimit
        guard separate || limit != nil else { return clients[kind] ?? direct }
        return madeClients.withLock { made in
            let key = MadeClient(kind: kind, connection: separate ? connection : 0, connectLimit: limit)
            if let client = made[key] { return client }
            let client = Self.makeClient(
                configuration,
                tls: tls,
                proxy: kind.proxied ? configuration.proxy : nil,
                decompressing: kind.decompressing,
                connectLimit: limit
            )
            made[key] = client
            return client
        }
    }

    deinit {
        // The shutdown's own callbacks keep the client alive until its pool has closed.
        for client in clients.values { client.shutdown { _ in } }
        for client in madeClients.withLock({ $0.values }) { client.shutdown { _ in } }
        http2?.shutdown()
        if let bridge { Task { await bridge.shutdown() } }
        if let made = streamBridge.withLock({ $0 }) { Task { await made.shutdown() } }
    }

    /// The session was invalidated: what must not outlive the process goes now, before the
    /// asynchronous ``shutdown()`` (a command-line tool may exit as soon as its tasks end).
    func invalidated() {
        bridge?.removeDirectory()
        streamBridge.withLock { $0 }?.removeDirectory()
    }

    func shutdown() async {
        for client in clients.values { try? await client.shutdown() }
        for client in madeClients.withLock({ Array($0.values) }) { try? await client.shutdown() }
        http2?.shutdown()
        await bridge?.shutdown()
        await streamBridge.withLock { $0 }?.shutdown()
    }
}
