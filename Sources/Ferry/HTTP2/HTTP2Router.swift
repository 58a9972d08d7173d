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
/// Flow control (RFC 9113 §5.2, §6.9): each stream may have ``streamWindow`` bytes in
/// flight, granted again once its reader took them (a ``ResponseStream`` that is full delays
/// the grant, so a slow reader slows the server, not memory); the connection may have
/// ``connectionWindow``, granted again as frames arrive, so one slow stream never stops the
/// others. Updates go out when half a window is used, as nghttp2 does, written below
/// `NIOHTTP2Handler` (which never sees the bytes they grant again). A server that sends
/// more than it was granted breaks the connection (or the stream) with
/// `FLOW_CONTROL_ERROR`.
final class HTTP2Router: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What each stream may have in flight: 10 MiB, curl's stream window (curl 7.88 offers
    /// 32 MiB). A server that waits for `WINDOW_UPDATE` before it goes on (Apache httpd's
    /// mod_http2 hands the data over from a worker thread) runs at its own pace only with a
    /// window several of its round trips wide: 256 MiB from mod_http2 over TLS on loopback,
    /// medians of 8 alternating runs, took 0.40 s with 1 MiB (curl 0.43 s, ferry with 32 MiB
    /// 0.36 s), and issue 58 measured 1 MiB at 1.3x curl's time. Memory: the window fills only
    /// while the reader is slower than the server (a ``ResponseStream`` that is full delays
    /// the grant); to ext4 and to tmpfs the peak RSS was 22-29 MiB with 1, 10 and 32 MiB.
    static let streamWindow = 10 << 20
    /// What the connection may have in flight, over all its streams: ten streams' windows,
    /// granted again as frames arrive (so it bounds the bytes on the wire, not memory), as
    /// curl sizes its connection window from its streams'.
    static let connectionWindow = 10 * streamWindow

    /// The settings sent in the connection preface.
    static let settings: HTTP2Settings = [
        HTTP2Setting(parameter: .enablePush, value: 0),
        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
        HTTP2Setting(parameter: .initialWindowSize, value: streamWindow),
        HTTP2Setting(parameter: .maxHeaderListSize, value: 64 << 10),
    ]

    private struct Stream {
        let sink: ResponseStream
        /// A `HEAD` request's response has no body, whatever its `content-length`.
        let isHead: Bool
        var answered = false
        var window = HTTP2InboundWindow(size: HTTP2Router.streamWindow)
        /// The body's length as `content-length` announced it, checked at its end (§8.1.1).
        var announced: Int?
        var received = 0
        /// The frame with `END_STREAM` began: the stream is closed, no window is granted.
        var lastFrame = false

        /// What the start of a `DATA` frame means for the stream.
        enum FrameStart { case accepted, beforeAnswer, overWindow }

        /// A `DATA` frame of `length` flow-controlled bytes begins (the stream is left as it
        /// was when it is not ``FrameStart/accepted``).
        mutating func begin(_ length: Int, endStream: Bool) -> FrameStart {
            guard answered else { return .beforeAnswer }
            guard window.received(length) else { return .overWindow }
            lastFrame = endStream
            return .accepted
        }

        /// `count` bytes of payload arrived; `false` when the body is now longer than its
        /// `content-length`.
        mutating func receive(_ count: Int) -> Bool {
            received += count
            return announced.map { received <= $0 } ?? true
        }

        /// `bytes` were taken by the reader; the `WINDOW_UPDATE` increment due, if any. The
        /// last frame's window is never granted: the stream is closed (a `WINDOW_UPDATE` on
        /// it would be a stream error).
        mutating func take(_ bytes: Int) -> Int? {
            lastFrame ? nil : window.taken(bytes)
        }
    }

    private let pool: HTTP2Pool
    private let number: Int
    private let idleTimeout: TimeAmount
    private var context: ChannelHandlerContext?
    /// Changed in place (`streams.modifyValue(forKey: id) { $0.begin(…) }`) for a frame: not
    /// copied out and back (a copy retains and releases the stream's sink, for each of
    /// nginx's 8 KiB frames), nor through `streams[id]?.begin(…)`, whose accessors allocate.
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID: Int32 = 1
    /// Where the streams' payload is gathered (made with the connection's allocator).
    private var gatherer: HTTP2Gatherer?
    private var connectionWindow = HTTP2InboundWindow(size: HTTP2Router.connectionWindow)
    /// ``HTTP2DataBypass``'s context: what is written there goes out below `NIOHTTP2Handler`.
    private var wire: ChannelHandlerContext?
    private var goingAway = false
    private var closed = false
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

    /// Set by ``HTTP2DataBypass`` as it joins the pipeline.
    func attach(wire: ChannelHandlerContext?) {
        self.wire = wire
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        wire = nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        gatherer = HTTP2Gatherer(allocator: context.channel.allocator)
        // The connection's window starts at 65,535 bytes (§6.9.2): raise it.
        let increment = Self.connectionWindow - 65_535
        context.writeAndFlush(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))),
            promise: nil
        )
    }

    // MARK: Streams

    /// Sends `headers` as a new stream whose response goes into `sink`.
    func open(_ headers: HPACKHeaders, into sink: ResponseStream) {
        // Client stream identifiers are odd and never reused (§5.1.1): when they run out, the
        // connection takes no more requests.
        if nextStreamID >= Int32.max - 1, !goingAway {
            goingAway = true
            pool.goingAway(number)
        }
        guard let context, !goingAway, !closed else {
            sink.finish(.failure(HTTP2Connection.NotStarted()))
            pool.released(number)
            return
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        streams[id] = Stream(sink: sink, isHead: headers.first(name: ":method") == "HEAD")
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
        guard streams[id] != nil, let context else { return }
        end(id, .failure(CancellationError()))
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
    }

    /// Ends stream `id` with `error` and tells the server so (`RST_STREAM` with `code`).
    private func reset(_ id: HTTP2StreamID, _ code: HTTP2ErrorCode, _ error: any Error) {
        end(id, .failure(error))
        write(HTTP2Frame(streamID: id, payload: .rstStream(code)))
    }

    /// Stream `id` is over: its reader learns how, the pool gets its slot back. A body
    /// shorter or longer than its `content-length` is a malformed response (§8.1.1).
    private func end(_ id: HTTP2StreamID, _ result: Result<Void, any Error>) {
        // What arrived before the end comes first.
        gatherer?.flush(id) { deliver($1, to: $0) }
        guard let stream = streams.removeValue(forKey: id) else { return }
        var result = result
        if case .success = result, let announced = stream.announced, stream.received != announced {
            result = .failure(NIOHTTP2Errors.contentLengthViolated())
        }
        // The stream is the pool's again before the reader hears: what the reader then lets
        // go (a download's per-host slot, at its end) may start a request that wants it.
        pool.released(number)
        stream.sink.finish(result)
        if streams.isEmpty, !closed, let channel = context?.channel {
            idleTimer = channel.eventLoop.scheduleTask(in: idleTimeout) { channel.close(promise: nil) }
        }
    }

    /// `bytes` of stream `id` were taken by its reader (or never reached it).
    private func grant(_ id: HTTP2StreamID, _ bytes: Int) {
        if let increment = streams.modifyValue(forKey: id, { $0.take(bytes) }) ?? nil {
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

    private func write(_ frame: HTTP2Frame) {
        guard let context else { return }
        context.write(wrapOutboundOut(frame), promise: nil)
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
            goingAway = true
            pool.goingAway(number)
            // Streams after the last one the server will answer were not processed
            // (§6.8): they may go again on another connection.
            for stream in streams.keys where stream > lastStreamID {
                end(stream, .failure(HTTP2Connection.NotStarted()))
            }
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
        guard var stream = streams[id] else { return }
        if !stream.answered {
            guard let status = headers.headers.first(name: ":status").flatMap({ Int($0) }) else {
                end(id, .failure(HTTP2Connection.MalformedResponse()))
                write(HTTP2Frame(streamID: id, payload: .rstStream(.protocolError)))
                return
            }
            // An interim response (103 Early Hints, 100 Continue) is not the answer.
            if (100..<200).contains(status) { return }
            var fields = HTTPHeaders()
            fields.reserveCapacity(headers.headers.count)
            for (name, value, _) in headers.headers where !name.hasPrefix(":") { fields.add(name: name, value: value) }
            do {
                stream.announced = try Self.announcedLength(fields, status: status, isHead: stream.isHead)
            } catch {
                reset(id, .protocolError, error)
                return
            }
            stream.answered = true
            streams[id] = stream
            stream.sink.received(HTTPResponseHead(version: .http2, status: .init(statusCode: status), headers: fields))
        }
        if headers.endStream { end(id, .success(())) }
    }

    /// The body's announced length, `nil` when there is none to check; `HEAD` and `304` have
    /// none, whatever the field says.
    ///
    /// - Throws: ``HTTP2Connection/MalformedResponse`` when the `content-length` fields are
    ///   not one number (§8.1.1, RFC 9110 §8.6).
    private static func announcedLength(_ fields: HTTPHeaders, status: Int, isHead: Bool) throws -> Int? {
        if isHead || status == 304 { return 0 }
        let values = fields[canonicalForm: "content-length"]
        guard let first = values.first else { return nil }
        guard values.allSatisfy({ $0 == first }), let length = Int(first), length >= 0 else {
            throw HTTP2Connection.MalformedResponse()
        }
        return length
    }

    // MARK: DATA, from the bypass

    /// Whether the `DATA` of stream `id` comes through the bypass: every stream this
    /// connection opened (odd, below the next identifier, §5.1.1). `DATA` of any other goes
    /// to `NIOHTTP2Handler`, which makes it the connection error it is.
    func owns(_ id: HTTP2StreamID) -> Bool {
        let number = Int32(id)
        return number % 2 == 1 && number < nextStreamID
    }

    /// A `DATA` frame of stream `id` begins; its payload follows.
    ///
    /// - Returns: `false` when the connection is over (the server sent more than the
    ///   connection's window): nothing more is to be read.
    func dataFrame(_ id: HTTP2StreamID, flowControlled length: Int, padding: Int, endStream: Bool) -> Bool {
        guard connectionWindow.received(length) else {
            connectionError(.flowControlError, NIOHTTP2Errors.flowControlViolation())
            return false
        }
        // The connection's window opens again as frames arrive, so that one slow stream never
        // stops the others; the stream's own window holds the server back.
        if let increment = connectionWindow.taken(length) { writeWindowUpdate(.rootStream, increment) }
        // A stream that ended meanwhile (cancelled, reset): its frames are counted and dropped.
        switch streams.modifyValue(forKey: id, { $0.begin(length, endStream: endStream) }) {
        case nil, .accepted:
            break
        case .beforeAnswer:
            // DATA before the response's HEADERS (§8.1).
            reset(id, .protocolError, HTTP2Connection.MalformedResponse())
            return true
        case .overWindow:
            reset(id, .flowControlError, NIOHTTP2Errors.flowControlViolation())
            return true
        }
        // The padding never reaches the reader: its window is granted at once.
        if padding > 0 { grant(id, padding) }
        return true
    }

    /// Payload of the `DATA` frame of stream `id` that began last, gathered for the stream's
    /// reader (``HTTP2Gatherer``), whose taking it grants the window again.
    func payload(_ id: HTTP2StreamID, _ buffer: ByteBuffer) {
        guard let withinLength = streams.modifyValue(forKey: id, { $0.receive(buffer.readableBytes) }) else {
            return
        }
        guard withinLength else {
            reset(id, .protocolError, NIOHTTP2Errors.contentLengthViolated())
            return
        }
        gatherer?.add(buffer, of: id) { deliver($1, to: $0) }
    }

    /// The bytes of a read are handled: what was gathered goes to its reader.
    func readHandled() {
        gatherer?.flush { deliver($1, to: $0) }
    }

    /// Hands `buffer` to stream `id`'s reader, whose taking it grants the window again.
    private func deliver(_ buffer: ByteBuffer, to id: HTTP2StreamID) {
        guard let stream = streams[id], let context else { return }
        let length = buffer.readableBytes
        if let full = stream.sink.received(buffer, on: context.eventLoop) {
            let router = NIOLoopBound(self, eventLoop: context.eventLoop)
            full.whenSuccess { router.value.grantAndFlush(id, length) }
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
        streams.index(forKey: id) != nil
    }

    /// The server broke the connection's rules: `GOAWAY` with `code`, every stream fails
    /// with `error`, the connection closes.
    func connectionError(_ code: HTTP2ErrorCode, _ error: any Error) {
        guard let context, !closed else { return }
        let goAway = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(lastStreamID: .rootStream, errorCode: code, opaqueData: nil)
        )
        context.writeAndFlush(wrapOutboundOut(goAway), promise: nil)
        failAll(error)
        context.close(promise: nil)
    }

    private func grantAndFlush(_ id: HTTP2StreamID, _ bytes: Int) {
        grant(id, bytes)
        flushIfNeeded()
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
        if let closed = event as? StreamClosedEvent, streams[closed.streamID] != nil {
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
        let wasClosed = closed
        closed = true
        goingAway = true
        idleTimer?.cancel()
        idleTimer = nil
        ready?.fail(error)
        ready = nil
        for id in Array(streams.keys) { end(id, .failure(error)) }
        if !wasClosed { pool.closed(number) }
    }
}

extension HTTP2Connection {
    /// The server answered with a header block that is not a response (no `:status`).
    struct MalformedResponse: Error, CustomStringConvertible {
        var description: String { "The server's HTTP/2 response has no valid :status." }
    }
}
