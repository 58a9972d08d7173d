import NIOCore
import NIOHTTP2

/// The handler in front of `NIOHTTP2Handler` on one of Ferry's HTTP/2 connections: it
/// performs ``HTTP2FrameSplitter``'s pieces, handing the `DATA` of the connection's streams
/// straight to its ``HTTP2Router`` and every other frame, as bytes, to `NIOHTTP2Handler`.
///
/// `NIOHTTP2Handler` learns of a stream's end all the same: for a `DATA` frame with
/// `END_STREAM`, it is given an empty one (which counts against no window), so its stream
/// state, and the server's concurrent-stream limit it keeps, stay true. It is made without
/// its own `content-length` check, which the router keeps instead (it sees the body).
///
/// Order: the router sees a response's `HEADERS` (through `NIOHTTP2Handler`, which decodes
/// a frame as soon as its last byte is handed on) before its `DATA`, and the `DATA` in the
/// order of the bytes; a read that arrives while one is being handled waits for it.
///
/// Threading: the connection's event loop only.
final class HTTP2DataBypass: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let router: HTTP2Router
    private var splitter = HTTP2FrameSplitter()
    /// Reads that arrived while one was being handled (a handler above reading again).
    private var waiting = CircularBuffer<ByteBuffer>()
    private var reading = false
    /// The connection broke HTTP/2's rules: nothing more is read.
    private var failed = false

    init(router: HTTP2Router) {
        self.router = router
    }

    func handlerAdded(context: ChannelHandlerContext) {
        router.wire = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        router.wire = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !failed else { return }
        waiting.append(unwrapInboundIn(data))
        guard !reading else { return }
        reading = true
        defer { reading = false }
        // Worked on as a local for the whole read and put back after: as a class's stored
        // property it costs an exclusivity check for each piece (three for each `DATA`
        // frame). Nothing the pieces lead to touches it: a read that arrives during this one
        // waits in `waiting`.
        var splitter = self.splitter
        defer { self.splitter = splitter }
        while var bytes = waiting.popFirst() {
            split(&bytes, with: &splitter, context: context)
        }
        router.readHandled()
    }

    private func split(
        _ bytes: inout ByteBuffer,
        with splitter: inout HTTP2FrameSplitter,
        context: ChannelHandlerContext
    ) {
        let router = self.router
        while let piece = splitter.next(&bytes, ours: { router.owns($0) }) {
            switch piece {
            case .forward(let frames):
                context.fireChannelRead(wrapInboundOut(frames))
            case .dataFrame(let id, let length, let padding, let endStream):
                if !router.dataFrame(id, flowControlled: length, padding: padding, endStream: endStream) {
                    stop()
                    return
                }
            case .payload(let id, let payload):
                router.payload(id, payload)
            case .endStream(let id):
                if router.endsStream(id) { context.fireChannelRead(wrapInboundOut(Self.endOfStream(id))) }
            case .connectionError(let code):
                let error: any Error =
                    code == .enhanceYourCalm
                    ? NIOHTTP2Errors.excessiveEmptyDataFrames() : NIOHTTP2Errors.unableToParseFrame()
                router.connectionError(code, error)
                stop()
                return
            }
        }
    }

    private func stop() {
        failed = true
        waiting.removeAll()
    }

    /// An empty `DATA` frame with `END_STREAM` on stream `id` (RFC 9113 §6.1).
    private static func endOfStream(_ id: HTTP2StreamID) -> ByteBuffer {
        var frame = ByteBuffer()
        frame.reserveCapacity(9)
        // Length 0, type DATA (0x0), flags END_STREAM (0x1), the stream.
        frame.writeInteger(UInt32(0))
        frame.writeInteger(UInt8(0x1))
        frame.writeInteger(UInt32(Int32(id)))
        return frame
    }
}
