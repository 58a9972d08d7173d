import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The TCP connection behind a ``StreamTask``: connects when the task is resumed, hands
/// arrived bytes to reads through a ``StreamReadState``, writes with back-pressure, closes
/// either direction, and upgrades to TLS in place.
///
/// ## Lifecycle
/// ``run(_:session:)`` is the task's transfer: it connects (within the session's
/// `timeoutIntervalForRequest`), then waits until the connection is closed (by the peer, by
/// ``closeRead()`` and ``closeWrite()`` both, or by cancelling the task) and completes the
/// task, with an error if the connection failed. Reads and writes made before the connection
/// exists wait for it.
///
/// ## Threading
/// Every method may be called from any thread. The read state and the channel sit behind
/// one lock; channel operations are NIO's thread-safe `Channel` calls; continuations are
/// resumed after the lock is released. ``Handler`` runs on the channel's event loop only.
final class StreamConnection: Sendable {
    /// How the connection is made.
    enum Route: Sendable {
        /// Straight to the host and port; TLS, if any, is started on it later.
        case direct
        /// By the session's ``TLSBridge``: through `proxy`'s tunnel when one is given, and
        /// for an `https` origin with TLS started and verified as the session verifies.
        case bridged(TLSBridge, Origin, via: Proxy?)
    }

    let host: String
    let port: Int
    let route: Route

    private struct State {
        var read = StreamReadState()
        var readers: [Int: CheckedContinuation<Result<(Data, Bool), FerryError>, Never>] = [:]
        var timers: [Int: Scheduled<Void>] = [:]
        var nextRead = 0
        var channel: (any Channel)?
        /// Callers waiting for the connection (reads and writes made before it exists), by
        /// the number each was given (a cancelled one leaves by it).
        var connectWaiters: [Int: CheckedContinuation<Result<any Channel, FerryError>, Never>] = [:]
        var nextWaiter = 0
        /// Why the connection could not be made or ended, once known.
        var failure: FerryError?
        var writeClosed = false
        var readClosed = false
        var handshake: CheckedContinuation<Result<Void, FerryError>, Never>?
        /// Ends the handshake that takes too long.
        var handshakeTimer: Scheduled<Void>?
        /// How the connection was opened, once it is; with the TLS handshake once one ends.
        var record: ConnectionRecord?
    }

    private let state = Mutex(State())

    init(host: String, port: Int, route: Route = .direct) {
        self.host = host
        self.port = port
        self.route = route
    }

    // MARK: The task's transfer

    /// Connects, waits for the end of the connection, and completes `task`.
    func run(_ task: SessionTask, session: Session) async {
        let error: FerryError?
        do {
            let channel = try await open(timeout: session.configuration.timeoutIntervalForRequest)
            try await withTaskCancellationHandler {
                try await channel.closeFuture.get()
            } onCancel: {
                SocketEnd.abort(channel)
            }
            try Task.checkCancellation()
            error = state.withLock { $0.failure }
        } catch {
            let failure = FerryError.mapping(error)
            settleConnection(.failure(failure))
            failed(failure)
            task.client.transferDidFinish(error: failure, outcome: nil)
            return
        }
        if let error {
            task.client.transferDidFinish(error: error, outcome: nil)
        } else if task.client.transferWillFinish() {
            task.client.transferDidFinish(error: nil, outcome: .streamed)
        } else {
            task.client.transferDidFinish(error: .cancelled(), outcome: nil)
        }
    }

    /// Connects, unless the connection is open already (one a data task's `Upgrade` or
    /// `CONNECT` made, handed to its stream task).
    func open(timeout: TimeInterval) async throws -> any Channel {
        if let channel = state.withLock({ $0.channel }) { return channel }
        return try await connect(timeout: timeout)
    }

    private func connect(timeout: TimeInterval) async throws -> any Channel {
        let connection = self
        let channel: any Channel
        let record: ConnectionRecord
        switch route {
        case .direct:
            let start = Date()
            let bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(Engine.connectTimeout(seconds: timeout))
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelOption(.autoRead, value: true)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers(SocketEnd(), Handler(connection))
                    }
                }
            channel = try await bootstrap.connect(host: host, port: port).channelUnlessCancelled()
            record = ConnectionRecord(
                connectStart: start,
                connectEnd: Date(),
                remoteAddress: channel.remoteAddress?.ipAddress,
                localAddress: channel.localAddress?.ipAddress,
                reused: false
            )
        case .bridged(let bridge, let origin, let proxy):
            let made = Mutex<ConnectionRecord?>(nil)
            do {
                channel = try await bridge.connect(
                    to: origin,
                    via: proxy,
                    on: MultiThreadedEventLoopGroup.singleton.next(),
                    timeout: Engine.connectTimeout(seconds: timeout)
                ) { outbound, opened in
                    try outbound.syncOptions?.setOption(.allowRemoteHalfClosure, value: true)
                    // Nearest the socket: below the bridge's TLS, if it started any.
                    try outbound.pipeline.syncOperations.addHandler(SocketEnd(), position: .first)
                    try outbound.pipeline.syncOperations.addHandler(Handler(connection))
                    made.withLock { $0 = opened }
                }.channelUnlessCancelled()
                record =
                    made.withLock { $0 } ?? ConnectionRecord(connectStart: Date(), connectEnd: Date(), reused: false)
            } catch {
                // The bridge's reason (a refused certificate, the proxy's challenge) over NIO's.
                throw bridge.failure(for: origin) ?? error
            }
        }
        if Task.isCancelled {
            channel.close(promise: nil)
            throw CancellationError()
        }
        state.withLock { $0.record = record }
        settleConnection(.success(channel))
        return channel
    }

    private func settleConnection(_ result: Result<any Channel, FerryError>) {
        let waiters = state.withLock { state in
            if case .success(let channel) = result { state.channel = channel }
            if case .failure(let error) = result, state.failure == nil { state.failure = error }
            defer { state.connectWaiters = [:] }
            return Array(state.connectWaiters.values)
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    /// The connection, once made. Waits while the task has not connected yet; throws the
    /// reason when it never will (the task ended first: ``taskEnded(_:)``), or when the
    /// calling Swift task is cancelled while it waits.
    private func channel() async throws(FerryError) -> any Channel {
        let waiter = Mutex<Int?>(nil)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<any Channel, FerryError>, Never>) in
                let ready: Result<any Channel, FerryError>? = state.withLock { state in
                    if let channel = state.channel { return .success(channel) }
                    if let failure = state.failure { return .failure(failure) }
                    if Task.isCancelled { return .failure(.cancelled()) }
                    state.nextWaiter += 1
                    state.connectWaiters[state.nextWaiter] = continuation
                    waiter.withLock { $0 = state.nextWaiter }
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let parked = state.withLock { state in
                waiter.withLock { $0 }.flatMap { state.connectWaiters.removeValue(forKey: $0) }
            }
            parked?.resume(returning: .failure(.cancelled()))
        }
        return try result.get()
    }

    /// The task ended (completed, whether or not it ever connected): calls still waiting for
    /// the connection, reads and a TLS handshake come back with `error`, and the connection,
    /// if one was made, closes.
    func taskEnded(_ error: FerryError?) {
        let failure = error ?? FerryError(.network, "The stream task has ended.")
        let (channel, readCompletion) = state.withLock { state -> ((any Channel)?, StreamReadState.Completion?) in
            if state.failure == nil { state.failure = failure }
            // A task that ended well ended with its input: reads get what arrived, then the end.
            return (state.channel, error.map { state.read.fail($0) } ?? state.read.endInput())
        }
        settleConnection(.failure(failure))
        finish(readCompletion)
        handshakeEnded(.failure(failure))
        // A task that ended well closes in order (TLS sends its `close_notify`); a cancelled
        // or failed one goes at once, without waiting for the peer's.
        if let channel { error == nil ? channel.close(promise: nil) : SocketEnd.abort(channel) }
    }

    // MARK: Reading

    /// Reads `minLength…maxLength` bytes; fewer only at the end of input.
    func read(minLength: Int, maxLength: Int, timeout: TimeInterval) async throws(FerryError) -> (Data, atEOF: Bool) {
        let channel = try await channel()
        let id = state.withLock { state in
            state.nextRead += 1
            return state.nextRead
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<(Data, Bool), FerryError>, Never>) in
                let action = state.withLock { state in
                    let action = state.read.read(id: id, minLength: minLength, maxLength: maxLength)
                    if case .wait = action {
                        state.readers[id] = continuation
                        if timeout > 0 {
                            state.timers[id] = channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout * 1e9))) {
                                self.abandonRead(
                                    id,
                                    FerryError(.timedOut(.idle), "No bytes to read arrived within \(timeout) s.")
                                )
                            }
                        }
                    }
                    return action
                }
                if case .complete(let completion) = action {
                    continuation.resume(returning: Self.result(of: completion))
                }
            }
        } onCancel: {
            abandonRead(id, .cancelled())
        }
        if case .success = result { resumeReadingIfHeld(channel) }
        let (data, atEOF) = try result.get()
        return (data, atEOF)
    }

    private func abandonRead(_ id: Int, _ error: FerryError) {
        finish(state.withLock { $0.read.abandon(id: id, with: error) })
    }

    private func resumeReadingIfHeld(_ channel: any Channel) {
        if state.withLock({ $0.read.shouldResumeReading() }) { channel.read() }
    }

    /// Completes the read `completion` names, after the lock is released.
    private func finish(_ completion: StreamReadState.Completion?) {
        guard let completion else { return }
        let id: Int
        switch completion {
        case .deliver(let reader, _, _): id = reader
        case .fail(let reader, _): id = reader
        }
        let (reader, timer) = state.withLock { ($0.readers.removeValue(forKey: id), $0.timers.removeValue(forKey: id)) }
        timer?.cancel()
        reader?.resume(returning: Self.result(of: completion))
    }

    private static func result(of completion: StreamReadState.Completion) -> Result<(Data, Bool), FerryError> {
        switch completion {
        case .deliver(_, let data, let atEOF): .success((data, atEOF))
        case .fail(_, let error): .failure(error)
        }
    }

    /// How the connection was opened (and its TLS handshake, once one ended), once it is.
    var record: ConnectionRecord? { state.withLock { $0.record } }

    /// Puts bytes read past a response head back in front of the stream.
    func unread(_ bytes: ByteBuffer) {
        guard bytes.readableBytes > 0 else { return }
        finish(state.withLock { $0.read.unread(bytes) })
    }

    /// Closes the connection at once (a data task that did not become a stream task).
    func close() {
        if let channel = state.withLock({ $0.channel }) { SocketEnd.abort(channel) }
    }

    // MARK: Writing and closing

    /// Writes `data`; returns once the bytes are handed to the operating system, or when the
    /// timeout or the calling Swift task's cancellation ends the wait (the bytes may still
    /// go out after either).
    func write(_ data: Data, timeout: TimeInterval) async throws(FerryError) {
        let channel = try await channel()
        if state.withLock({ $0.writeClosed }) {
            throw FerryError(.invalidRequest, "The stream task's writing side is closed (closeWrite).")
        }
        let written = channel.eventLoop.makePromise(of: Void.self)
        channel.writeAndFlush(ByteBuffer(bytes: data)).cascade(to: written)
        if timeout > 0 {
            written.fail(after: .nanoseconds(Int64(timeout * 1e9))) {
                FerryError(.timedOut(.idle), "The write did not go out within \(timeout) s.")
            }
        }
        do {
            try await written.valueUnlessCancelled()
        } catch {
            throw FerryError.mapping(error)
        }
    }

    /// Closes the writing side once the writes made so far are out (the peer reads an end of
    /// input); reading goes on. Waits at most `timeout` seconds, and no longer than the
    /// calling Swift task is not cancelled: while a peer that does not read holds those
    /// writes up, the end of input stays queued behind them.
    func closeWrite(timeout: TimeInterval) async {
        guard let channel = try? await channel() else { return }
        let both = state.withLock { state in
            state.writeClosed = true
            return state.readClosed
        }
        await Self.wait(for: both ? channel.close() : channel.close(mode: .output), atMost: timeout)
    }

    /// Closes the reading side: reads end (bytes already arrived are still handed out). Waits
    /// for the close as ``closeWrite(timeout:)`` does.
    func closeRead(timeout: TimeInterval) async {
        guard let channel = try? await channel() else { return }
        let (completion, both) = state.withLock { state in
            state.readClosed = true
            return (state.read.endInput(), state.writeClosed)
        }
        finish(completion)
        await Self.wait(for: both ? channel.close() : channel.close(mode: .input), atMost: timeout)
    }

    /// Waits for `closing` to end, at most `timeout` seconds and no longer than the calling
    /// Swift task is not cancelled; the close goes on either way.
    private static func wait(for closing: EventLoopFuture<Void>, atMost timeout: TimeInterval) async {
        let waited = closing.eventLoop.makePromise(of: Void.self)
        closing.cascade(to: waited)
        waited.fail(after: Engine.connectTimeout(seconds: timeout)) { CancellationError() }
        try? await waited.valueUnlessCancelled()
    }

    /// Starts TLS on the connection, verifying the server as the session verifies https hosts
    /// (its trust roots, a certificate pin for `host`), and waits for the handshake: at most
    /// `timeout` seconds (0 for no limit), and no longer than the calling Swift task is not
    /// cancelled. A handshake given up on closes the connection (it is in no state to go on).
    func startSecureConnection(_ configuration: TLSConfiguration, timeout: TimeInterval) async throws(FerryError) {
        let channel = try await channel()
        let host = self.host
        let secureStart = Date()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<Void, FerryError>, Never>) in
                let refusal: FerryError? = state.withLock { state in
                    if let failure = state.failure { return failure }
                    guard state.handshake == nil else {
                        return FerryError(.invalidRequest, "A TLS handshake is already under way on this stream task.")
                    }
                    // Cancelled before waiting: the cancellation handler found nothing to end.
                    if Task.isCancelled { return .cancelled() }
                    state.handshake = continuation
                    if timeout > 0 {
                        state.handshakeTimer = channel.eventLoop.scheduleTask(in: .nanoseconds(Int64(timeout * 1e9))) {
                            self.abandonHandshake(
                                FerryError(.timedOut(.idle), "The TLS handshake did not end within \(timeout) s."),
                                on: channel
                            )
                        }
                    }
                    return nil
                }
                if let refusal {
                    continuation.resume(returning: .failure(refusal))
                    return
                }
                let added = channel.eventLoop.submit {
                    let context = try NIOSSLContext(configuration: configuration)
                    let name = host.isIPAddress ? nil : host
                    let handler = try NIOSSLClientHandler(context: context, serverHostname: name)
                    // Innermost, next to the task's handler: over the socket, or over the TLS a
                    // bridge started to a proxy's origin.
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(handler, position: .before(try pipeline.handler(type: Handler.self)))
                }
                added.whenFailure { error in self.handshakeEnded(.failure(FerryError.mapping(error))) }
            }
        } onCancel: {
            abandonHandshake(.cancelled(), on: channel)
        }
        try result.get()
        state.withLock { state in
            state.record?.secureConnectionStart = secureStart
            state.record?.secureConnectionEnd = Date()
        }
    }

    /// Ends a handshake under way with `error`, and the connection with it.
    private func abandonHandshake(_ error: FerryError, on channel: any Channel) {
        if handshakeEnded(.failure(error)) { SocketEnd.abort(channel) }
    }

    /// Ends TLS on the connection (`close_notify` both ways) and goes on in plaintext.
    ///
    /// A peer that does not answer within `timeout`, or the calling Swift task's
    /// cancellation, ends the wait and the connection with it (a TLS stream closed on one
    /// side only leaves nothing to speak on).
    func stopSecureConnection(timeout: TimeInterval) async throws(FerryError) {
        let channel = try await channel()
        let unwrapped = channel.eventLoop.makePromise(of: Void.self)
        channel.eventLoop.execute {
            do {
                try channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self).stopTLS(promise: unwrapped)
            } catch {
                unwrapped.fail(FerryError(.invalidRequest, "The stream task has no secure connection to stop."))
            }
        }
        unwrapped.fail(after: Engine.connectTimeout(seconds: timeout)) {
            FerryError(.timedOut(.idle), "The peer did not answer close_notify within \(timeout) s.")
        }
        unwrapped.futureResult.whenFailure { error in
            if error is CancellationError || (error as? FerryError)?.reason == .timedOut(.idle) {
                SocketEnd.abort(channel)
            }
        }
        do {
            try await unwrapped.valueUnlessCancelled()
        } catch {
            throw FerryError.mapping(error)
        }
    }

    /// Resumes the handshake's caller, if one waits; whether one did.
    @discardableResult
    fileprivate func handshakeEnded(_ result: Result<Void, FerryError>) -> Bool {
        let waiter = state.withLock { state in
            defer {
                state.handshake = nil
                state.handshakeTimer?.cancel()
                state.handshakeTimer = nil
            }
            return state.handshake
        }
        waiter?.resume(returning: result)
        return waiter != nil
    }

    // MARK: Events from the handler

    fileprivate func received(_ bytes: ByteBuffer) {
        finish(state.withLock { $0.read.received(bytes) })
    }

    fileprivate func inputEnded() {
        finish(state.withLock { $0.read.endInput() })
    }

    fileprivate func failed(_ error: FerryError) {
        let completion = state.withLock { state in
            if state.failure == nil { state.failure = error }
            return state.read.fail(error)
        }
        finish(completion)
        handshakeEnded(.failure(error))
    }

    fileprivate func mayRead() -> Bool {
        state.withLock { $0.read.mayReadFromSocket() }
    }

    fileprivate func closed() {
        inputEnded()
        handshakeEnded(.failure(FerryError(.network, "The connection closed during the TLS handshake.")))
    }
}

extension StreamConnection {
    /// The pipeline's end nearest the socket. Closing from here closes the socket at once,
    /// past any TLS above it: a TLS handler asked to close sends `close_notify` and waits up
    /// to its shutdown timeout (5 s) for the peer's, which a cancelled task must not.
    final class SocketEnd: ChannelOutboundHandler, RemovableChannelHandler {
        typealias OutboundIn = Any

        /// Closes `channel`'s socket now, from its ``SocketEnd`` (from the top of the
        /// pipeline when it has none).
        static func abort(_ channel: any Channel) {
            channel.eventLoop.execute {
                if let end = try? channel.pipeline.syncOperations.context(handlerType: SocketEnd.self) {
                    end.close(promise: nil)
                } else {
                    channel.close(promise: nil)
                }
            }
        }
    }

    /// The channel handler that feeds the connection: bytes, the end of input, errors, the
    /// TLS handshake's end; it holds socket reads while the read buffer is full.
    final class Handler: ChannelDuplexHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        private let connection: StreamConnection

        init(_ connection: StreamConnection) { self.connection = connection }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            connection.received(unwrapInboundIn(data))
        }

        func read(context: ChannelHandlerContext) {
            if connection.mayRead() { context.read() }
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            switch event {
            case ChannelEvent.inputClosed:
                connection.inputEnded()
            case TLSUserEvent.handshakeCompleted:
                connection.handshakeEnded(.success(()))
            default:
                context.fireUserInboundEventTriggered(event)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            connection.failed(FerryError.mapping(error))
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            connection.closed()
            context.fireChannelInactive()
        }
    }
}
