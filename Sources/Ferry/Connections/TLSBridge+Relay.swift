import Foundation
import NIOCore
import NIOHTTP1

/// The relay between one of AsyncHTTPClient's connections to the bridge (the client side)
/// and the connection Ferry made to the origin (the server side).
///
/// Requests are decoded on the client side (NIO's request decoder), so each request's
/// `Ferry-Trace` field can name the connection it travels on, then encoded again towards the
/// origin without that field; responses go back as bytes, untouched. Reading pauses on
/// either side while the other cannot write (back-pressure), and either side closing closes
/// both. Both channels are on one event loop; the handlers are only touched there.
enum BridgeRelay {
    /// The request field that carries a transaction's trace id to the bridge.
    static let traceField = "Ferry-Trace"

    /// Adds the relay's handlers to both channels (on their shared event loop).
    static func install(
        client: any Channel,
        server: any Channel,
        connection: ConnectionRecord,
        record: @escaping (String, ConnectionRecord) -> Void
    ) throws {
        let front = ClientFront()
        let requests = RequestSide(front: front, connection: connection, record: record)
        let responses = ResponseSide()
        requests.partner = responses
        responses.partner = requests
        try client.pipeline.syncOperations.addHandler(front, position: .first)
        try client.pipeline.syncOperations.addHandlers(
            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes)),
            requests
        )
        try server.pipeline.syncOperations.addHandlers(HTTPRequestEncoder(), responses)
    }
}

/// The client channel's first handler: responses are written from its context, straight to
/// the socket (the request decoder behind it would not take bytes).
private final class ClientFront: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = ByteBuffer
    var context: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }
}

/// What both sides of the relay share: reading pauses while the other side cannot write,
/// and one side closing closes the other.
private class RelayEnd {
    var context: ChannelHandlerContext?
    private var readPending = false

    /// The side this one writes to.
    var other: RelayEnd? { nil }

    var isWritable: Bool { context?.channel.isWritable ?? false }

    func flush() { context?.flush() }

    func close() { context?.close(promise: nil) }

    func resumeReading() {
        guard readPending, let context, other?.isWritable ?? false else { return }
        readPending = false
        context.read()
    }

    func gate(_ context: ChannelHandlerContext) {
        if other?.isWritable ?? false {
            context.read()
        } else {
            readPending = true
        }
    }

    func writabilityChanged(_ context: ChannelHandlerContext) {
        if context.channel.isWritable { other?.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    func inactive(_ context: ChannelHandlerContext) {
        other?.close()
        context.fireChannelInactive()
    }
}

/// Decoded requests from AsyncHTTPClient, forwarded to the origin.
private final class RequestSide: RelayEnd, ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = Never

    weak var partner: ResponseSide?
    private let front: ClientFront
    private var connection: ConnectionRecord
    private let record: (String, ConnectionRecord) -> Void

    init(front: ClientFront, connection: ConnectionRecord, record: @escaping (String, ConnectionRecord) -> Void) {
        self.front = front
        self.connection = connection
        self.record = record
    }

    override var other: RelayEnd? { partner }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(var head):
            if let trace = head.headers.first(name: BridgeRelay.traceField) {
                head.headers.remove(name: BridgeRelay.traceField)
                record(trace, connection)
            }
            connection.reused = true
            partner?.send(.head(head))
        case .body(let buffer):
            partner?.send(.body(.byteBuffer(buffer)))
        case .end(let trailers):
            partner?.send(.end(trailers))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { partner?.flush() }
    func channelInactive(context: ChannelHandlerContext) { inactive(context) }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    func channelWritabilityChanged(context: ChannelHandlerContext) { writabilityChanged(context) }
    func read(context: ChannelHandlerContext) { gate(context) }

    /// Responses go out in front of the request decoder.
    func sendResponse(_ data: NIOAny) { front.context?.write(data, promise: nil) }

    override func flush() { front.context?.flush() }
}

/// The origin's response bytes, sent back to AsyncHTTPClient as they come.
private final class ResponseSide: RelayEnd, ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Never
    typealias OutboundOut = HTTPClientRequestPart

    var partner: RequestSide?

    override var other: RelayEnd? { partner }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        // The request side may have paused a read before this side was there to wake it.
        partner?.resumeReading()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { partner?.sendResponse(data) }
    func channelReadComplete(context: ChannelHandlerContext) { partner?.flush() }
    func channelInactive(context: ChannelHandlerContext) { inactive(context) }
    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    func channelWritabilityChanged(context: ChannelHandlerContext) { writabilityChanged(context) }
    func read(context: ChannelHandlerContext) { gate(context) }

    func send(_ part: HTTPClientRequestPart) { context?.write(wrapOutboundOut(part), promise: nil) }
}
