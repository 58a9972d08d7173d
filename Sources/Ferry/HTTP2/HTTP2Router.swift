import AsyncHTTPClient
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOSSL

/// The handler behind `NIOHTTP2Handler` on one of Ferry's HTTP/2 connections: it opens the
/// connection's streams, hands each response and its body to the stream's
/// ``ResponseStream``, and grants the server flow-control window as the streams' readers
/// take the bytes.
///
/// Threading: everything runs on the connection's event loop; other threads reach it only
/// through ``HTTP2Connection`` (which hops there) and the pool's callbacks.
///
/// Two ways in: `NIOHTTP2Handler` hands it every frame but the `DATA` of its streams, which
/// ``HTTP2DataBypass`` (in front of `NIOHTTP2Handler`) hands it directly, without the
/// handler's frame decoding (``HTTP2FrameSplitter``):
/// ``dataFrame(_:flowControlled:padding:endStream:)``, ``payload(_:_:)``, ``readHandled()``,
/// ``endsStream(_:)``. So the router keeps what the handler kept for
/// those frames: flow control and the body's announced length.
///
/// What to do about each frame is decided by its ``State``, a value with no I/O (the
/// streams, their windows and the connection's, the lengths announced, whether the
/// connection is going away), as ``HTTP2Pool/State`` decides for the pool; the router
/// performs the answers: frames written, readers told, the pool told, the idle timer.
///
/// Flow control (RFC 9113 §5.2, §6.9): each stream may have
/// ``HTTP2InboundWindow/streamSize`` bytes in
/// flight, granted again once its reader took them (a ``ResponseStream`` that is full delays
/// the grant, so a slow reader slows the server, not memory); the connection may have
/// ``HTTP2InboundWindow/connectionSize``, granted again as frames arrive, so one slow stream never stops the
/// others. Updates go out when half a window is used, as nghttp2 does, written below
/// `NIOHTTP2Handler` (which never sees the bytes they grant again). A server that sends
/// more than it was granted breaks the connection (or the stream) with
/// `FLOW_CONTROL_ERROR`.
final class HTTP2Router: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let pool: HTTP2Pool
    private let number: Int
    private let idleTimeout: TimeAmount
    private var context: ChannelHandlerContext?
    /// The streams and flow control: the decisions, which this class performs.
    private var state = State<ResponseStream>(
        streamWindow: HTTP2InboundWindow.streamSize,
        connectionWindow: HTTP2InboundWindow.connectionSize
    )
    /// Where the streams' payload is gathered (made with the connection's allocator).
    private var gatherer: HTTP2Gatherer?
    /// ``HTTP2DataBypass``'s context: what is written there goes out below `NIOHTTP2Handler`.
    /// Set by the bypass as it joins the pipeline and leaves it.
    var wire: ChannelHandlerContext?
    private var needsFlush = false
    /// A ``flushSoon()`` is queued on the event loop.
    private var flushQueued = false
    private var idleTimer: Scheduled<Void>?
    /// What the pool waits for while it opens the connection: the router, and the streams
    /// the server allows at once.
    typealias Ready = (router: NIOLoopBound<HTTP2Router>, limit: Int)

    /// Fulfilled at the server's first `SETTINGS`.
    private var ready: EventLoopPromise<Ready>?

    init(pool: HTTP2Pool, number: Int, idleTimeout: TimeAmount, ready: EventLoopPromise<Ready>) {
        self.pool = pool
        self.number = number
        self.idleTimeout = idleTimeout
        self.ready = ready
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        wire = nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        gatherer = HTTP2Gatherer(allocator: context.channel.allocator)
        // The connection's window starts at 65,535 bytes (§6.9.2): raise it.
        let increment = HTTP2InboundWindow.connectionSize - 65_535
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
            promise: nil
        )
    }

    // MARK: Streams

    /// Sends `headers` as a new stream whose response goes into `sink`.
    func open(_ headers: HPACKHeaders, into sink: ResponseStream) {
        let action = context == nil ? .refuse : state.open(sink, isHead: headers.first(name: ":method") == "HEAD")
        guard case .send(let id) = action, let context else {
            if action == .refuseAndGoAway { pool.goingAway(number) }
            sink.finish(.failure(HTTP2Connection.NotStarted()))
            pool.released(number)
            return
        }
        idleTimer?.cancel()
        idleTimer = nil
        let router = NIOLoopBound(self, eventLoop: context.eventLoop)
        sink.attach { router.eventLoop.execute { router.value.cancel(id) } }
        let sent = context.eventLoop.makePromise(of: Void.self)
        sent.futureResult.whenComplete { result in
            switch result {
            case .success: sink.requestSent()
            case .failure(let error): router.value.end(id, .failure(HTTP2Connection.NotStarted(underlying: error)))
            }
        }
        let frame = HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: true)))
        context.write(wrapOutboundOut(frame), promise: sent)
        flushSoon()
    }

    /// Flushes once the event loop has run what is queued on it: requests opened meanwhile
    /// (a batch of transfers starting, or the next ones as a read ends several) leave in one
    /// TLS record and one system call, not one each.
    private func flushSoon() {
        needsFlush = true
        guard !flushQueued, let context else { return }
        flushQueued = true
        let router = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            router.value.flushQueued = false
            router.value.flushIfNeeded()
        }
    }

    /// The reader gave up on stream `id`: the server is told to stop sending it.
    private func cancel(_ id: HTTP2StreamID) {
        guard state.isOpen(id), let context else { return }
        end(id, .failure(CancellationError()))
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
    }

    /// Ends stream `id` with `error` and tells the server so (`RST_STREAM` with `code`).
    private func reset(_ id: HTTP2StreamID, _ code: HTTP2ErrorCode, _ violation: State<ResponseStream>.Violation) {
        end(id, .failure(violation.error))
        guard let context else { return }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(code))), promise: nil)
        needsFlush = true
    }

    /// Stream `id` is over: its reader learns how, the pool gets its slot back. A body
    /// shorter or longer than its `content-length` is a malformed response (§8.1.1).
    private func end(_ id: HTTP2StreamID, _ result: Result<Void, any Error>) {
        // What arrived before the end comes first.
        gatherer?.flush(id) { deliver($1, to: $0) }
        let succeeded = if case .success = result { true } else { false }
        guard let ended = state.end(id, succeeded: succeeded) else { return }
        // The stream is the pool's again before the reader hears: what the reader then lets
        // go (a download's per-host slot, at its end) may start a request that wants it.
        pool.released(number)
        ended.sink.finish(ended.violation.map { .failure($0.error) } ?? result)
        if ended.leavesIdle, let channel = context?.channel {
            idleTimer = channel.eventLoop.scheduleTask(in: idleTimeout) { channel.close(promise: nil) }
        }
    }

    /// `bytes` of stream `id` were taken by its reader (or never reached it).
    private func grant(_ id: HTTP2StreamID, _ bytes: Int) {
        if let increment = state.taken(bytes, of: id) {
            writeWindowUpdate(id, increment)
        }
    }

    /// A `WINDOW_UPDATE` (§6.9), written below `NIOHTTP2Handler`: the handler never counted
    /// the bytes it grants again, and would take the grant for a window grown too large.
    private func writeWindowUpdate(_ id: HTTP2StreamID, _ increment: Int) {
        guard let wire else { return }
        var frame = wire.channel.allocator.buffer(capacity: 13)
        // Length 4, type WINDOW_UPDATE (0x8), no flags, the stream, the increment.
        frame.writeInteger(UInt32(4 << 8 | 0x8))
        frame.writeInteger(UInt8(0))
        frame.writeInteger(UInt32(Int32(id)))
        frame.writeInteger(UInt32(increment))
        wire.write(NIOAny(frame), promise: nil)
        needsFlush = true
    }

    // MARK: Frames

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case .headers(let headers):
            received(headers, on: id)
        case .data(let data):
            // The bypass takes every DATA frame of this connection's streams; what comes this
            // way is the empty frame it passes on for END_STREAM, so that the handler closes
            // the stream too.
            if data.endStream { end(id, .success(())) }
        case .rstStream(let code):
            end(id, .failure(NIOHTTP2Errors.streamClosed(streamID: id, errorCode: code)))
        case .goAway(let lastStreamID, _, _):
            let notProcessed = state.goAway(lastStreamID: lastStreamID)
            pool.goingAway(number)
            for stream in notProcessed { end(stream, .failure(HTTP2Connection.NotStarted())) }
        case .settings(.settings(let settings)):
            let limit = settings.last(where: { $0.parameter == .maxConcurrentStreams })?.value
            if let ready {
                // The pool learns the first limit as the connection opens.
                self.ready = nil
                ready.succeed((NIOLoopBound(self, eventLoop: context.eventLoop), limit ?? 100))
            } else if let limit {
                pool.limitChanged(number, to: limit)
            }
        default:
            break
        }
    }

    private func received(_ headers: HTTP2Frame.FramePayload.Headers, on id: HTTP2StreamID) {
        switch state.headers(headers.headers, endStream: headers.endStream, on: id) {
        case .none:
            break
        case .answer(let sink, let head, let endsStream):
            sink.received(head)
            if endsStream { end(id, .success(())) }
        case .interim(let sink, let head):
            sink.receivedInformational(head)
        case .trailers(let sink, let fields):
            sink.receivedTrailers(fields)
            end(id, .success(()))
        case .reset(let code, let violation):
            reset(id, code, violation)
        }
    }

    // MARK: DATA, from the bypass

    /// Whether the `DATA` of stream `id` comes through the bypass: every stream this
    /// connection opened (odd, below the next identifier, §5.1.1). `DATA` of any other goes
    /// to `NIOHTTP2Handler`, which makes it the connection error it is.
    func owns(_ id: HTTP2StreamID) -> Bool {
        state.owns(id)
    }

    /// A `DATA` frame of stream `id` begins; its payload follows.
    ///
    /// - Returns: `false` when the connection is over (the server sent more than the
    ///   connection's window): nothing more is to be read.
    func dataFrame(_ id: HTTP2StreamID, flowControlled length: Int, padding: Int, endStream: Bool) -> Bool {
        let action = state.dataFrame(id, flowControlled: length, padding: padding, endStream: endStream)
        switch action {
        case .connectionError:
            connectionError(.flowControlError, NIOHTTP2Errors.flowControlViolation())
            return false
        case .accept(let connectionUpdate, let streamUpdate):
            if let connectionUpdate { writeWindowUpdate(.rootStream, connectionUpdate) }
            if let streamUpdate { writeWindowUpdate(id, streamUpdate) }
        case .reset(let connectionUpdate, let code, let violation):
            if let connectionUpdate { writeWindowUpdate(.rootStream, connectionUpdate) }
            reset(id, code, violation)
        }
        return true
    }

    /// Payload of the `DATA` frame of stream `id` that began last, gathered for the stream's
    /// reader (``HTTP2Gatherer``), whose taking it grants the window again.
    func payload(_ id: HTTP2StreamID, _ buffer: ByteBuffer) {
        switch state.payload(id, count: buffer.readableBytes) {
        case .deliver: gatherer?.add(buffer, of: id) { deliver($1, to: $0) }
        case .drop: break
        case .reset(let code, let violation): reset(id, code, violation)
        }
    }

    /// The bytes of a read are handled: what was gathered goes to its reader.
    func readHandled() {
        gatherer?.flush { deliver($1, to: $0) }
    }

    /// Hands `buffer` to stream `id`'s reader, whose taking it grants the window again.
    private func deliver(_ buffer: ByteBuffer, to id: HTTP2StreamID) {
        guard let sink = state.sink(of: id), let context else { return }
        let length = buffer.readableBytes
        if let full = sink.received(buffer, on: context.eventLoop) {
            let router = NIOLoopBound(self, eventLoop: context.eventLoop)
            full.whenSuccess {
                router.value.grant(id, length)
                router.value.flushIfNeeded()
            }
        } else {
            grant(id, length)
        }
    }

    /// The `DATA` frame of stream `id` that began last ended the stream.
    ///
    /// - Returns: whether `NIOHTTP2Handler` is to learn of it (an empty `DATA` frame with
    ///   `END_STREAM`, which ends the stream here too): when the stream is still open here.
    ///   One that ended already was reset, and the handler closed it then.
    func endsStream(_ id: HTTP2StreamID) -> Bool {
        state.isOpen(id)
    }

    /// The server broke the connection's rules: `GOAWAY` with `code`, every stream fails
    /// with `error`, the connection closes.
    func connectionError(_ code: HTTP2ErrorCode, _ error: any Error) {
        guard let context, !state.isClosed else { return }
        let goAway = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: .rootStream, errorCode: code, opaqueData: nil)
        )
        context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
        failAll(error)
        context.close(promise: nil)
    }

    private func flushIfNeeded() {
        guard needsFlush, let context else { return }
        needsFlush = false
        // Through the HTTP/2 handler for the frames written there (it flushes only when it
        // wrote one), and from the wire for the window updates written below it.
        context.flush()
        wire?.flush()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flushIfNeeded()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The HTTP/2 handler closed a stream itself (a stream error it found): whoever
        // still reads it learns why.
        if let closed = event as? StreamClosedEvent, state.isOpen(closed.streamID) {
            let id = closed.streamID
            if let reason = closed.reason {
                end(id, .failure(NIOHTTP2Errors.streamClosed(streamID: id, errorCode: reason)))
            } else {
                // Closed cleanly: by the END_STREAM of a frame still on its way here (the
                // event can overtake it when a frame is written meanwhile). Failed only if
                // that frame never comes.
                let router = NIOLoopBound(self, eventLoop: context.eventLoop)
                context.eventLoop.execute { router.value.end(id, .failure(HTTP2Connection.MalformedResponse())) }
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let error = error as? NIOHTTP2Errors.StreamError {
            end(error.streamID, .failure(error.baseError))
            return
        }
        // A frame of ours for a stream the server closed meanwhile: nothing is lost.
        if error is NIOHTTP2Errors.NoSuchStream || error is NIOHTTP2Errors.StreamClosed { return }
        // A connection error: the HTTP/2 handler sent GOAWAY; nothing more can go right here.
        // A close without TLS's close_notify (nginx's old worker after a reload) is a closed
        // connection, not a failed handshake.
        failAll(error as? NIOSSLError == .uncleanShutdown ? HTTPClientError.remoteConnectionClosed : error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(HTTPClientError.remoteConnectionClosed)
        context.fireChannelInactive()
    }

    private func failAll(_ error: any Error) {
        let (wasOpen, streams) = state.close()
        idleTimer?.cancel()
        idleTimer = nil
        ready?.fail(error)
        ready = nil
        for id in streams { end(id, .failure(error)) }
        if wasOpen { pool.closed(number) }
    }
}

extension HTTP2Router.State.Violation {
    /// The error a reader hears for a response that broke the protocol this way.
    var error: any Error {
        switch self {
        case .flowControl: NIOHTTP2Errors.flowControlViolation()
        case .malformedResponse: HTTP2Connection.MalformedResponse()
        case .contentLength: NIOHTTP2Errors.contentLengthViolated()
        }
    }
}

extension HTTP2Connection {
    /// The server answered with a header block that is not a response (no `:status`).
    struct MalformedResponse: Error, CustomStringConvertible {
        var description: String { "The server's HTTP/2 response has no valid :status." }
    }
}
