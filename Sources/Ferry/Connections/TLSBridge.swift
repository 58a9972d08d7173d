import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import NIOSOCKS
import NIOSSL
import NIOTLS
import Synchronization

/// Carries AsyncHTTPClient's requests to the hosts Ferry verifies itself over TLS
/// connections Ferry makes: AsyncHTTPClient offers no hook to verify a server's certificate
/// (public-key pins, the delegate's server-trust challenge).
///
/// For each such origin the bridge listens on a Unix socket in a directory only the user
/// may enter. A request for `https://host/path` goes to AsyncHTTPClient as
/// `http+unix://SOCKET/path` with `Host: host`; each plaintext connection the client opens
/// there is paired with one TLS connection to the origin, connected, verified by
/// ``TrustEvaluator`` (and the delegate) and handshaken before a byte is relayed. The pool
/// keeps and reuses the pairs as it would direct connections. A refused chain closes the
/// plaintext connection and is remembered, so the request fails with the reason rather than
/// "connection closed". Through the session's proxy when it applies: an HTTP `CONNECT`
/// tunnel (with its credential) or SOCKS5, then TLS inside it.
///
/// ## Lifecycle and threading
/// Made by the engine when the configuration needs it; listeners open on first use. The
/// sockets' directory goes when the session is invalidated (``removeDirectory()``), the
/// listeners close at ``shutdown()``. Both channels of a pair live on one
/// event loop; everything else is behind one lock.
final class TLSBridge: Sendable {
    typealias AskDelegate = @Sendable (ServerTrustChallenge) async -> ServerTrustDisposition

    private struct State {
        var listeners: [Listener: EventLoopFuture<any Channel>] = [:]
        var failures: [Origin: any Error] = [:]
        /// The connection each traced request went over, until its transfer takes it.
        var connections: [String: ConnectionRecord] = [:]
        /// `Proxy-Authorization` for the HTTP proxy's `CONNECT`: the configured credential
        /// (Basic) at first, then the answer to its last challenge.
        var proxyAuthorization: String?
        var nextTrace = 0
        var askDelegate: AskDelegate?
        var nextSocket = 0
    }

    let evaluator: TrustEvaluator
    private let proxy: Proxy?
    private let context: NIOSSLContext
    private let directory: URL
    private let connectTimeout: TimeAmount
    private let state = Mutex(State())

    /// A listener's origin, and how long the connections it pairs may take to connect
    /// (seconds; `nil` for ``connectTimeout``): a request that may wait longer than the
    /// session allows has listeners of its own (``Engine/connectLimit(covering:)``).
    private struct Listener: Hashable {
        var origin: Origin
        var connectLimit: Int?
    }

    init(evaluator: TrustEvaluator, proxy: Proxy?, connectTimeout: TimeAmount) throws {
        self.evaluator = evaluator
        self.proxy = proxy
        state.withLock { $0.proxyAuthorization = proxy?.credential?.authorization }
        self.connectTimeout = connectTimeout
        context = try NIOSSLContext(configuration: evaluator.connection)
        directory = try Self.makeDirectory()
    }

    /// The bridge's sockets' directory, `ferry-tls-PID-RANDOM` under `TMPDIR`, that only the
    /// user may enter.
    ///
    /// A process that ends without invalidating its session (an `exit`, a crash, `kill -9`)
    /// never removes its directory; so the first bridge of a process removes those of its
    /// user's processes that are gone.
    private static func makeDirectory() throws -> URL {
        let base = FileManager.default.temporaryDirectory
        removeLeftovers(in: base)
        let directory = base.appendingPathComponent(
            "\(directoryPrefix)\(getpid())-\(UUID().uuidString.prefix(8))",
            isDirectory: true
        )
        try FileManager.default.createDirectory(
            at: directory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        return directory
    }

    private static let directoryPrefix = "ferry-tls-"

    /// Removes, once per process, the bridge directories in `base` that belong to this user
    /// and to a process that no longer runs. Names of older versions
    /// (`ferry-tls-XXXXXXXX-XXX`, no PID) do not match and are left alone.
    ///
    /// The first caller claims the scan and runs it; a concurrent one does not wait for it.
    private static func removeLeftovers(in base: URL) {
        guard leftoversClaimed.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
        else { return }
        EndedProcessLeftovers.remove(in: base, prefix: directoryPrefix, tagLength: 8)
    }

    private static let leftoversClaimed = Atomic(false)

    /// Removes the sockets' directory now: the session was invalidated, and its process may
    /// end before ``shutdown()`` (which closes the listeners) has run. Bound listeners keep
    /// working; no new request goes through them.
    func removeDirectory() {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Who answers ``ServerTrustChallenge``s (the session sets it once it exists).
    func setDelegate(_ ask: @escaping AskDelegate) {
        state.withLock { $0.askDelegate = ask }
    }

    /// The URL AsyncHTTPClient must use for `url`, and the `Host` field to send with it.
    ///
    /// - Parameter connectLimit: how many seconds the connection to the origin may take
    ///   (its TCP connect, a proxy's tunnel, the TLS handshake); `nil` for the session's.
    func route(_ url: URL, connectLimit: Int? = nil) async throws -> (url: URL, host: String) {
        let origin = Origin(url)
        let key = Listener(origin: origin, connectLimit: connectLimit)
        let timeout = connectLimit.map { Engine.connectTimeout(seconds: TimeInterval($0)) } ?? connectTimeout
        let listener = state.withLock { state in
            if let listener = state.listeners[key] { return listener }
            let path = directory.appendingPathComponent("\(state.nextSocket).sock").path
            state.nextSocket += 1
            let listener = listen(
                at: path,
                for: origin,
                via: proxy?.applies(to: url) == true ? proxy : nil,
                timeout: timeout
            )
            state.listeners[key] = listener
            return listener
        }
        let channel = try await listener.get()
        guard let path = channel.localAddress?.pathname,
            let routed = URL(httpURLWithSocketPath: path, uri: url.requestTarget)
        else {
            throw FerryError(.network, "The TLS bridge for \(origin) has no socket.")
        }
        let host = URL.authorityHost(url.host ?? origin.host)
        return (routed, url.port.map { "\(host):\($0)" } ?? host)
    }

    /// A new trace id for a request: sent as `Ferry-Trace`, it names the connection the
    /// request went over (see ``connection(for:)``).
    func makeTrace() -> String {
        state.withLock { state in
            state.nextTrace += 1
            return String(state.nextTrace)
        }
    }

    /// The connection the request traced as `trace` went over, once it was sent.
    func connection(for trace: String) -> ConnectionRecord? {
        state.withLock { $0.connections.removeValue(forKey: trace) }
    }

    /// Answers the proxy's challenge on the next `CONNECT`s.
    func setProxyAuthorization(_ value: String) {
        state.withLock { $0.proxyAuthorization = value }
    }

    /// Why the last connection to `origin` failed, if it did.
    func failure(for origin: Origin) -> (any Error)? {
        state.withLock { $0.failures[origin] }
    }

    func shutdown() async {
        let listeners = state.withLock { state in
            defer { state.listeners = [:] }
            return Array(state.listeners.values)
        }
        for listener in listeners {
            try? await listener.get().close()
        }
        try? FileManager.default.removeItem(at: directory)
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    private func listen(
        at path: String,
        for origin: Origin,
        via proxy: Proxy?,
        timeout: TimeAmount
    ) -> EventLoopFuture<any Channel> {
        ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { [self] inbound in
                pair(inbound, withConnectionTo: origin, via: proxy, timeout: timeout)
            }
            .bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true)
    }

    /// Connects to `origin`, verifies it, and relays between it and `inbound` (registered
    /// only once this succeeds, so it reads nothing before).
    private func pair(
        _ inbound: any Channel,
        withConnectionTo origin: Origin,
        via proxy: Proxy?,
        timeout: TimeAmount
    ) -> EventLoopFuture<Void> {
        connect(to: origin, via: proxy, on: inbound.eventLoop, timeout: timeout) { [self] outbound, connection in
            try BridgeRelay.install(client: inbound, server: outbound, connection: connection) {
                [self] trace, used in
                state.withLock { $0.connections[trace] = used }
            }
        }.map { _ in }
    }

    /// Connects to `origin` (through `proxy`'s tunnel when one is given, then TLS for
    /// `https`, verified by ``evaluate(_:origin:)``) and hands the channel, on `loop`, to
    /// `install` before it reads a byte of the origin's; the future is that channel.
    ///
    /// The bridge's own pairs use it, and so do the connections Ferry speaks on itself
    /// (an upgrade's: ``StreamConnection``), so both go through the session's proxy and its
    /// verification alike. A failure is remembered for ``failure(for:)``, which says why in
    /// Ferry's terms (a refused certificate's reason, the proxy's ``ProxyChallenge``) where
    /// the future's error is NIO's.
    ///
    /// - Parameter timeout: for the TCP connect, and again for the tunnel and the handshake.
    func connect(
        to origin: Origin,
        via proxy: Proxy?,
        on loop: any EventLoop,
        timeout: TimeAmount,
        install: @escaping @Sendable (any Channel, ConnectionRecord) throws -> Void
    ) -> EventLoopFuture<any Channel> {
        let handshake = loop.makePromise(of: Void.self)
        let connectStart = Date()
        let connectEnd = NIOLockedValueBox<Date?>(nil)
        let connected = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelInitializer { [self] outbound in
                outbound.eventLoop.makeCompletedFuture {
                    let watcher = HandshakeWatcher(handshake)
                    try outbound.pipeline.syncOperations.addHandler(watcher)
                    try openTunnel(on: outbound, to: origin, via: proxy, timeout: timeout, watcher: watcher) {
                        connectEnd.withLockedValue { $0 = Date() }
                    }
                }
            }
            .connect(host: proxy?.host ?? origin.host, port: proxy?.port ?? origin.port)
        connected.whenFailure { handshake.fail($0) }
        // The tunnel and the handshake get the connect timeout too: a server (or proxy) that
        // accepts and then says nothing does not hold two sockets for ever.
        connected.whenSuccess { outbound in
            let timer = loop.scheduleTask(in: timeout) {
                handshake.fail(HTTPClientError.connectTimeout)
                outbound.close(promise: nil)
            }
            handshake.futureResult.whenComplete { _ in timer.cancel() }
        }
        return connected.and(handshake.futureResult)
            .flatMapThrowing { [self] outbound, _ in
                let tunnelled = connectEnd.withLockedValue { $0 } ?? Date()
                let secure = origin.scheme == "https"
                let connection = ConnectionRecord(
                    connectStart: connectStart,
                    connectEnd: tunnelled,
                    secureConnectionStart: secure ? tunnelled : nil,
                    secureConnectionEnd: secure ? Date() : nil,
                    remoteAddress: outbound.remoteAddress?.ipAddress,
                    localAddress: outbound.localAddress?.ipAddress,
                    reused: false
                )
                do {
                    try install(outbound, connection)
                } catch {
                    outbound.close(promise: nil)
                    throw error
                }
                state.withLock { $0.failures[origin] = nil }
                return outbound
            }
            .flatMapErrorThrowing { [self] error in
                state.withLock { state in
                    if state.failures[origin] == nil || !(error is NIOSSLError) { state.failures[origin] = error }
                }
                throw error
            }
    }

    /// Starts TLS to `origin` on `outbound` (plain `http` is ready as it is): at once, or once
    /// the proxy's tunnel is open; `connected` marks the moment the byte stream reaches the
    /// origin.
    private func openTunnel(
        on outbound: any Channel,
        to origin: Origin,
        via proxy: Proxy?,
        timeout: TimeAmount,
        watcher: HandshakeWatcher,
        connected: @escaping () -> Void
    ) throws {
        let pipeline = outbound.pipeline.syncOperations
        let ready = { [self] in
            connected()
            if origin.scheme == "https" {
                try startTLS(on: outbound, to: origin)
            } else {
                // Plain http: the connection is all there is to wait for.
                watcher.succeed()
                outbound.pipeline.syncOperations.removeHandler(watcher, promise: nil)
            }
        }
        switch proxy?.kind {
        case nil:
            // Once the connection is up (this runs before).
            try pipeline.addHandler(ActiveWatcher(ready), position: .first)
        case .http?:
            let tunnel = outbound.eventLoop.makePromise(of: Void.self)
            let encoder = HTTPRequestEncoder()
            let decoder = ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .forwardBytes))
            var headers = HTTPHeaders()
            if let authorization = state.withLock({ $0.proxyAuthorization }) {
                headers.add(name: "Proxy-Authorization", value: authorization)
            }
            let observer = ChallengeObserver()
            let connect = NIOHTTP1ProxyConnectHandler(
                targetHost: origin.host,
                targetPort: origin.port,
                headers: headers,
                deadline: .now() + timeout,
                promise: tunnel
            )
            try pipeline.addHandlers([encoder, decoder, observer, connect], position: .first)
            // On the channel's event loop, where the handlers live.
            tunnel.futureResult.assumeIsolated().whenComplete { result in
                do {
                    try result.get()
                    pipeline.removeHandler(encoder, promise: nil)
                    pipeline.removeHandler(decoder, promise: nil)
                    pipeline.removeHandler(observer, promise: nil)
                    try ready()
                } catch {
                    // A 407 becomes the challenge, for the transfer to answer.
                    if let challenges = observer.challenges, let proxy {
                        watcher.fail(ProxyChallenge(proxy: proxy, challenges: challenges))
                    } else {
                        watcher.fail(error)
                    }
                    outbound.close(promise: nil)
                }
            }
        case .socks5?:
            if let credential = proxy?.credential {
                let handshake = SOCKS5Handshake(host: origin.host, port: origin.port, credential: credential)
                try pipeline.addHandler(SOCKS5Handler(handshake, established: ready), position: .first)
            } else {
                try pipeline.addHandler(
                    SOCKSClientHandler(targetAddress: .domain(origin.host, port: origin.port)),
                    position: .first
                )
                try pipeline.addHandler(SOCKSWatcher(ready))
            }
        case .https?:
            // The configuration refuses an https proxy before a bridge exists.
            throw FerryError(.unsupportedConfiguration, "An https proxy is not supported.")
        }
    }

    /// Puts TLS, verified by ``evaluate(_:origin:)``, next to the socket (or the tunnel).
    private func startTLS(on outbound: any Channel, to origin: Origin) throws {
        let tls = try NIOSSLClientHandler(
            context: context,
            serverHostname: origin.host.isIPAddress ? nil : origin.host,
            customVerificationCallback: { [self] chain, verified in
                Task { verified.succeed(await self.evaluate(chain, origin: origin)) }
            }
        )
        try outbound.pipeline.syncOperations.addHandler(tls, position: .first)
    }

    /// The session's verdict, then the delegate's, on a chain `origin` sent.
    private func evaluate(_ chain: [NIOSSLCertificate], origin: Origin) async -> NIOSSLVerificationResult {
        let verdict = await evaluator.verdict(on: chain, host: origin.host)
        var refusal = verdict
        if evaluator.asksDelegate, let ask = state.withLock({ $0.askDelegate }) {
            let challenge = evaluator.challenge(chain: chain, host: origin.host, port: origin.port, verdict: verdict)
            switch await ask(challenge) {
            case .performDefaultHandling: break
            case .trust: refusal = nil
            case .cancel: refusal = "The delegate refused the certificate of \(origin.host)."
            }
        }
        state.withLock { state in
            state.failures[origin] = refusal.map { FerryError(.secureConnectionFailed, $0) }
        }
        return refusal == nil ? .certificateVerified : .failed
    }
}
