import AsyncHTTPClient
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOSSL

/// The handler behind `NIOHTTP2Handler` on one of Ferry's HTTP/2 connections: it opens the
/// connection's streams, hands each frame to its stream's ``ResponseStream``, and grants the
/// server flow-control window as the streams' readers take the bytes.
///
/// Threading: everything runs on the connection's event loop; other threads reach it only
/// through ``HTTP2Connection`` (which hops there) and the pool's callbacks.
///
/// Flow control (RFC 9113 §5.2, §6.9): each stream may have ``streamWindow`` bytes in
/// flight, granted again once its reader took them (a ``ResponseStream`` that is full delays
/// the grant, so a slow reader slows the server, not memory); the connection may have
/// ``connectionWindow``, granted again as frames arrive, so one slow stream never stops the
/// others. Updates go out when half a window is used, as nghttp2 does.
final class HTTP2Router: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// What each stream may have in flight: 1 MiB, twice a ``ResponseStream``'s read-ahead
    /// (a bandwidth-delay product of 20 ms at 400 Mbit/s). Measured on loopback with a
    /// 1 GiB file: 4 MiB gained 0.1 s of 1.7 and cost 12 MiB of resident memory, as the
    /// window fills whenever the disk is slower than the network.
    static let streamWindow = 1 << 20
    /// What the connection may have in flight, over all its streams.
    static let connectionWindow = 16 << 20

    /// The settings sent in the connection preface.
    static let settings: HTTP2Settings = [
        HTTP2Setting(parameter: .enablePush, value: 0),
        HTTP2Setting(parameter: .maxConcurrentStreams, value: 100),
        HTTP2Setting(parameter: .initialWindowSize, value: streamWindow),
        HTTP2Setting(parameter: .maxHeaderListSize, value: 64 << 10),
    ]

    private struct Stream {
        let sink: ResponseStream
        var answered = false
        /// Bytes taken by the reader and not yet granted again.
        var ungranted = 0
    }

    private let pool: HTTP2Pool
    private let number: Int
    private let idleTimeout: TimeAmount
    private var context: ChannelHandlerContext?
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID: Int32 = 1
    private var connectionUngranted = 0
    private var goingAway = false
    private var closed = false
    private var needsFlush = false
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

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
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
        streams[id] = Stream(sink: sink)
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
        context.writeAndFlush(wrapOutboundOut(frame), promise: sent)
    }

    /// The reader gave up on stream `id`: the server is told to stop sending it.
    private func cancel(_ id: HTTP2StreamID) {
        guard streams[id] != nil, let context else { return }
        end(id, .failure(CancellationError()))
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
    }

    /// Stream `id` is over: its reader learns how, the pool gets its slot back.
    private func end(_ id: HTTP2StreamID, _ result: Result<Void, any Error>) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.sink.finish(result)
        pool.released(number)
        if streams.isEmpty, !closed, let channel = context?.channel {
            idleTimer = channel.eventLoop.scheduleTask(in: idleTimeout) { channel.close(promise: nil) }
        }
    }

    /// `bytes` of stream `id` were taken by its reader (or never reached it).
    private func grant(_ id: HTTP2StreamID, _ bytes: Int) {
        guard var stream = streams[id] else { return }
        stream.ungranted += bytes
        if stream.ungranted >= Self.streamWindow / 2 {
            write(HTTP2Frame(streamID: id, payload: .windowUpdate(windowSizeIncrement: stream.ungranted)))
            stream.ungranted = 0
        }
        streams[id] = stream
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
            received(data, on: id, context: context)
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
            stream.answered = true
            streams[id] = stream
            stream.sink.received(HTTPResponseHead(version: .http2, status: .init(statusCode: status), headers: fields))
        }
        if headers.endStream { end(id, .success(())) }
    }

    private func received(_ data: HTTP2Frame.FramePayload.Data, on id: HTTP2StreamID, context: ChannelHandlerContext) {
        // Flow control counts the padding too (§6.1).
        let length = data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
        // The stream first: a frame written now makes the HTTP/2 handler deliver the events
        // it holds (this stream's close among them) before this frame has been handled.
        defer {
            connectionUngranted += length
            if connectionUngranted >= Self.connectionWindow / 2 {
                write(
                    HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: connectionUngranted))
                )
                connectionUngranted = 0
            }
        }
        guard let stream = streams[id] else { return }
        let full: EventLoopFuture<Void>?
        if case .byteBuffer(let buffer) = data.data, buffer.readableBytes > 0 {
            full = stream.sink.received(buffer, on: context.eventLoop)
        } else {
            full = nil
        }
        // The last frame's window is never granted: the stream is closed (a WINDOW_UPDATE
        // on it would be a stream error).
        if data.endStream {
            end(id, .success(()))
        } else if let full {
            let router = NIOLoopBound(self, eventLoop: context.eventLoop)
            full.whenSuccess { router.value.grantAndFlush(id, length) }
        } else {
            grant(id, length)
        }
    }

    private func grantAndFlush(_ id: HTTP2StreamID, _ bytes: Int) {
        grant(id, bytes)
        flushIfNeeded()
    }

    private func flushIfNeeded() {
        guard needsFlush, let context else { return }
        needsFlush = false
        context.flush()
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
