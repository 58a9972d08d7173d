import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// Ferry's own HTTP/2 connections of one session, by origin: opened with ALPN offering
/// `h2` and `http/1.1`, several per origin when the streams a server allows are fewer than
/// the requests waiting (AsyncHTTPClient opens one, whatever `SETTINGS_MAX_CONCURRENT_STREAMS`
/// says), one of its own for each further connection of a segmented download.
///
/// It carries the requests AsyncHTTPClient's HTTP/2 path was slowest at: those without a
/// body, to an `https` origin, not through a proxy or the TLS bridge, not decoded (see
/// ``Engine/execute(_:onActivity:)``). An origin that chooses `http/1.1` in ALPN is
/// remembered, and its requests go through AsyncHTTPClient: the one connection that found
/// out is closed, once per session.
///
/// The decisions are ``State``'s; this class performs them: it opens connections (TLS with
/// the session's trust and identity, a host's pin where it has one), wakes the requests that
/// waited for one, and hears from each connection's ``HTTP2Router`` when streams end,
/// limits change, and connections go away. Thread-safe: the state sits behind one lock.
final class HTTP2Pool: Sendable {
    /// The origin answered ALPN with `http/1.1` (or nothing).
    fileprivate struct ChoseHTTP1: Error {}

    private struct Locked {
        var state: State
        /// The requests waiting for each opening, by a number of their own (so a cancelled
        /// one can leave).
        var waiting: [Int: [Int: CheckedContinuation<Void, any Error>]] = [:]
        var nextWaiter = 0
        var live: [Int: HTTP2Connection] = [:]
        /// TLS contexts by pinned host ("" for the session's own), made once: loading the
        /// trust roots costs milliseconds.
        var contexts: [String: NIOSSLContext] = [:]
    }

    /// The settings sent in each connection's preface: no push, 100 streams at once, each
    /// stream's window (``HTTP2InboundWindow/streamSize``), header lists up to 64 KiB.
    static let settings: HTTP2Settings = [
        HTTP2Setting(parameter: .enablePush, value: 0),
        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
        HTTP2Setting(parameter: .initialWindowSize, value: HTTP2InboundWindow.streamSize),
        HTTP2Setting(parameter: .maxHeaderListSize, value: 64 << 10),
    ]

    private let locked: Mutex<Locked>
    private let tls: ResolvedTLS
    private let connectTimeout: TimeAmount
    private let idleTimeout: TimeAmount

    init(tls: ResolvedTLS, maximumConnections: Int, connectTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.tls = tls
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        locked = Mutex(Locked(state: State(maximumConnections: maximumConnections)))
    }

    /// A connection to `url`'s origin with a stream counted for the caller, opened on
    /// `eventLoop` if a new one is needed; `nil` when the origin speaks HTTP/1.1 only.
    ///
    /// A caller cancelled while it waits (its transfer cancelled, or timed out) comes back at
    /// once with `CancellationError`, whether it opens the connection or waits for another
    /// caller's opening; an opening it abandons lets its waiters ask again.
    ///
    /// - Parameters:
    ///   - origin: `url`'s origin.
    ///   - slot: which of a segmented download's connections (0 for any other request):
    ///     each slot above 0 has a connection of its own.
    ///   - connectLimit: seconds a connection this caller opens may take, when longer than
    ///     the session's (``Engine/connectLimit(covering:)``).
    /// - Throws: why the connection could not be opened (refused, timed out, TLS).
    func connection(
        for url: URL,
        origin: Origin,
        slot: Int,
        on eventLoop: any EventLoop,
        connectLimit: Int? = nil
    ) async throws -> HTTP2Connection? {
        let key = State.Key(origin: origin, slot: slot)
        while true {
            let (action, connection) = locked.withLock { locked in
                let action = locked.state.lease(key)
                if case .use(let number) = action { return (action, locked.live[number]) }
                return (action, nil)
            }
            switch action {
            case .http1:
                return nil
            case .use:
                // `live` and the state's connections change together, under the one lock.
                guard let connection else { preconditionFailure("the state counts only live connections") }
                return connection
            case .wait(let number):
                // A failed opening fails its waiters too: a connection that could not be
                // made fails its requests at once, as AsyncHTTPClient's pool is set to do
                // (``Engine``), rather than each trying again in turn.
                try await waitForOpening(number)
            case .connect(let number):
                let timeout = connectLimit.map { Engine.connectTimeout(seconds: TimeInterval($0)) } ?? connectTimeout
                do {
                    let (connection, limit) = try await open(number, to: url, on: eventLoop, timeout: timeout)
                    settle(number) { state, live in
                        if state.opened(number, limit: limit) { live[number] = connection }
                    }
                } catch is ChoseHTTP1 {
                    settle(number) { state, _ in state.negotiatedHTTP1(number) }
                    return nil
                } catch is CancellationError {
                    // This caller gave up, not the connection: its waiters ask again.
                    settle(number) { state, _ in state.failed(number) }
                    throw CancellationError()
                } catch {
                    settle(number, failing: error) { state, _ in state.failed(number) }
                    throw error
                }
            }
        }
    }

    /// Waits until opening `number` ends (at once if it has); throws `CancellationError` as
    /// soon as the caller is cancelled, so no request waits on a connection past its own
    /// timeout (an opening may have a longer limit than the request waiting for it).
    private func waitForOpening(_ number: Int) async throws {
        let id = locked.withLock { locked in
            defer { locked.nextWaiter += 1 }
            return locked.nextWaiter
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let waits = locked.withLock { locked in
                    // Checked under the lock the cancellation handler takes: a cancel either
                    // comes before (and is seen here) or finds the continuation to end.
                    guard locked.state.openings[number] != nil, !Task.isCancelled else { return false }
                    locked.waiting[number, default: [:]][id] = continuation
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            let continuation = locked.withLock { locked in
                let continuation = locked.waiting[number]?.removeValue(forKey: id)
                if continuation != nil { locked.state.stoppedWaiting(number) }
                return continuation
            }
            continuation?.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// Ends opening `number` in the state, and wakes those who waited for it: to ask again,
    /// or with the opening's `error`.
    private func settle(
        _ number: Int,
        failing error: (any Error)? = nil,
        _ change: (inout State, inout [Int: HTTP2Connection]) -> Void
    ) {
        let waiters = locked.withLock { locked in
            change(&locked.state, &locked.live)
            return locked.waiting.removeValue(forKey: number).map { Array($0.values) } ?? []
        }
        for waiter in waiters {
            if let error { waiter.resume(throwing: error) } else { waiter.resume() }
        }
    }

    // MARK: From the routers

    func released(_ number: Int) { locked.withLock { $0.state.released(number) } }
    func limitChanged(_ number: Int, to limit: Int) { locked.withLock { $0.state.limitChanged(number, to: limit) } }
    func goingAway(_ number: Int) { locked.withLock { $0.state.goingAway(number) } }

    func closed(_ number: Int) {
        locked.withLock { locked in
            locked.state.closed(number)
            locked.live.removeValue(forKey: number)
        }
    }

    /// Closes every connection (the session is done with them).
    func shutdown() {
        for connection in locked.withLock({ Array($0.live.values) }) { connection.close() }
    }

    // MARK: Opening

    /// Opens connection `number`: TCP, TLS with ALPN, the HTTP/2 preface both ways.
    ///
    /// - Returns: the connection and the streams its server allows at once.
    /// - Throws: ``ChoseHTTP1`` when the server chose HTTP/1.1; `CancellationError` as soon
    ///   as the caller is cancelled (the socket is closed once it connects); why it failed
    ///   otherwise, within `timeout` (which covers the handshake and the server's `SETTINGS`).
    private func open(
        _ number: Int,
        to url: URL,
        on eventLoop: any EventLoop,
        timeout: TimeAmount
    ) async throws -> (HTTP2Connection, Int) {
        let host = url.host ?? ""
        let port = Origin(url).port
        let context = try sslContext(forHost: host)
        // Ended once: by the router at the server's first SETTINGS, or by the first failure
        // (refused, the handshake, HTTP/1.1 chosen, closed, the timeout).
        let ready = eventLoop.makePromise(of: HTTP2Router.Ready.self)
        let start = Date()
        let idleTimeout = self.idleTimeout
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(timeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: context, serverHostname: host.isIPAddress ? nil : host)
                    // The HTTP/2 handlers go in as the handshake ends, before the server's
                    // first frames (sent with its last handshake bytes) pass by.
                    let waiter = ALPNWaiter(ready) { pipeline in
                        let router = HTTP2Router(pool: self, number: number, idleTimeout: idleTimeout, ready: ready)
                        // The DATA of the connection's streams goes round the HTTP/2 handler
                        // (HTTP2DataBypass), which therefore leaves the body's length to the
                        // router.
                        try pipeline.addHandlers(
                            HTTP2DataBypass(router: router),
                            NIOHTTP2Handler(
                                mode: .client,
                                initialSettings: Self.settings,
                                contentLengthValidation: .disabled
                            ),
                            router
                        )
                    }
                    try channel.pipeline.syncOperations.addHandlers(tls, waiter)
                }
            }
        // Everything below ends `ready`: the connect's failure, the handshake's and the
        // preface's timeout (from the connect on), and the caller's cancellation; a socket
        // connected after `ready` failed is closed at once.
        let connected = NIOLockedValueBox<Date?>(nil)
        let connecting = bootstrap.connect(host: host, port: port)
        connecting.whenComplete { result in
            switch result {
            case .success(let channel):
                connected.withLockedValue { $0 = Date() }
                ready.fail(after: timeout) { HTTPClientError.connectTimeout }
                ready.futureResult.whenFailure { _ in channel.close(promise: nil) }
            case .failure(let error):
                ready.fail(error)
            }
        }
        let (router, limit) = try await ready.valueUnlessCancelled()
        // `ready` succeeds only from the connected channel's router.
        let channel = try await connecting.get()
        let record = ConnectionRecord(
            connectStart: start,
            connectEnd: connected.withLockedValue { $0 } ?? start,
            secureConnectionStart: connected.withLockedValue { $0 } ?? start,
            secureConnectionEnd: Date(),
            remoteAddress: channel.remoteAddress?.ipAddress,
            localAddress: channel.localAddress?.ipAddress,
            reused: false
        )
        return (HTTP2Connection(number: number, channel: channel, router: router, record: record), limit)
    }

    private func sslContext(forHost host: String) throws -> NIOSSLContext {
        let key = tls.pinned[host.lowercased()] == nil ? "" : host.lowercased()
        if let made = locked.withLock({ $0.contexts[key] }) { return made }
        var configuration = tls.configuration(forHost: host)
        configuration.applicationProtocols = ["h2", "http/1.1"]
        let context = try NIOSSLContext(configuration: configuration)
        locked.withLock { $0.contexts[key] = context }
        return context
    }
}

/// Waits for the TLS handshake's end: adds the HTTP/2 handlers when ALPN chose `h2`, fails
/// the connection's `ready` otherwise; then leaves the pipeline.
private final class ALPNWaiter: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let ready: EventLoopPromise<HTTP2Router.Ready>
    /// Adds the HTTP/2 handlers, whose router ends `ready`.
    private let http2: (ChannelPipeline.SynchronousOperations) throws -> Void

    init(
        _ ready: EventLoopPromise<HTTP2Router.Ready>,
        http2: @escaping (ChannelPipeline.SynchronousOperations) throws -> Void
    ) {
        self.ready = ready
        self.http2 = http2
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let chosen) = event as? TLSUserEvent {
            if chosen == "h2" {
                do {
                    try http2(context.pipeline.syncOperations)
                } catch {
                    errorCaught(context: context, error: error)
                    return
                }
            } else {
                ready.fail(HTTP2Pool.ChoseHTTP1())
            }
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        ready.fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(HTTPClientError.remoteConnectionClosed)
        context.fireChannelInactive()
    }
}
