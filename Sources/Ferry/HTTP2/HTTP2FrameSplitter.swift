import NIOCore
import NIOHTTP2

/// Finds, in the bytes a connection receives, the `DATA` frames of the streams this client
/// opened, and hands their payloads on as they are: the one thing on an HTTP/2 download
/// that happens per byte. Every other frame goes on, as bytes, to `NIOHTTP2Handler`.
///
/// Why: `NIOHTTP2Handler`'s frame decoder copies every byte it is given into the frame it
/// assembles, then runs its stream state machine and flow control for each frame; at
/// nginx's 8 KiB `DATA` frames that was most of the CPU of a 1 GiB download, and the
/// reason it took 1.45× curl's time over HTTP/2 but less than curl's over HTTP/1.1. The
/// splitter reads only the 9-byte frame headers (RFC 9113 §4.1) and, for a `DATA` frame,
/// the pad length (§6.1); the payload is a slice of the buffer TLS handed up.
///
/// A value with no I/O: ``next(_:ours:)`` takes the bytes and returns one ``Piece`` at a
/// time; ``HTTP2DataBypass`` performs them. The rules it keeps, each tested in
/// `HTTP2FrameSplitterTests` with the bytes split at every offset:
/// - A frame is either forwarded whole (its header and payload, in order, possibly in
///   several pieces) or taken apart; the pieces come in the order of the bytes.
/// - Only `DATA` of a stream `ours` accepts, no longer than ``maximumFrameSize``, is taken
///   apart. `DATA` on stream 0, on a stream this client never opened, or too long goes to
///   `NIOHTTP2Handler`, whose checks make it a connection error as before.
/// - A padded frame whose pad length is not less than its length is a connection error
///   (`PROTOCOL_ERROR`, §6.1), as is a padded frame with no room for the pad length
///   (`FRAME_SIZE_ERROR`); after one, nothing more is read.
/// - More than ``maximumSequentialEmptyDataFrames`` empty `DATA` frames in a row without
///   `END_STREAM` (and no `HEADERS` between) is a connection error (`ENHANCE_YOUR_CALM`),
///   the protection `NIOHTTP2Handler` had when it saw those frames.
struct HTTP2FrameSplitter {
    /// What the bytes hold, in their order.
    enum Piece: Equatable {
        /// Bytes of frames for `NIOHTTP2Handler`.
        case forward(ByteBuffer)
        /// A `DATA` frame of `stream` begins. `flowControlled` is its whole length, which
        /// counts against both windows (§6.9.1); `padding` the part of it that is not payload
        /// (the pad length byte and the padding).
        case dataFrame(HTTP2StreamID, flowControlled: Int, padding: Int, endStream: Bool)
        /// Payload of the `DATA` frame of `stream` that began last.
        case payload(HTTP2StreamID, ByteBuffer)
        /// The `DATA` frame of `stream` that began last ended, with `END_STREAM`.
        case endStream(HTTP2StreamID)
        /// The server broke the framing rules: the connection must end with `code`.
        case connectionError(HTTP2ErrorCode)
    }

    /// `SETTINGS_MAX_FRAME_SIZE` as this client leaves it (§6.5.2's initial value).
    static let maximumFrameSize = 1 << 14
    /// `NIOHTTP2Handler`'s default, kept.
    static let maximumSequentialEmptyDataFrames = 1

    private static let headerLength = 9
    private static let dataType: UInt8 = 0x0
    private static let headersType: UInt8 = 0x1
    private static let endStreamFlag: UInt8 = 0x1
    private static let paddedFlag: UInt8 = 0x8

    /// A frame's 9-byte header (§4.1).
    private struct FrameHeader {
        var length: Int
        var type: UInt8
        var flags: UInt8
        var stream: HTTP2StreamID

        /// Reads the header at `index` of `buffer` in place (no slice of it is made: a slice
        /// retains the buffer, and this runs for every frame).
        init(_ buffer: ByteBuffer, at index: Int) {
            length =
                Int(buffer.getInteger(at: index, as: UInt8.self)!) << 16
                | Int(buffer.getInteger(at: index + 1, as: UInt16.self)!)
            type = buffer.getInteger(at: index + 3, as: UInt8.self)!
            flags = buffer.getInteger(at: index + 4, as: UInt8.self)!
            stream = HTTP2StreamID(
                Int32(bitPattern: buffer.getInteger(at: index + 5, as: UInt32.self)! & 0x7fff_ffff)
            )
        }
    }

    private struct DataFrame {
        var stream: HTTP2StreamID
        var length: Int
        var endStream: Bool
    }

    private enum State {
        /// Between frames; `partial` holds the first bytes of a header split across reads.
        case header(partial: [UInt8])
        /// Forwarding a frame's remaining `count` bytes.
        case forwarding(count: Int)
        /// A padded `DATA` frame whose pad length byte comes next.
        case padLength(DataFrame)
        /// `count` payload bytes of `frame` still to come, then `padding` bytes.
        case payload(DataFrame, count: Int, padding: Int)
        /// `count` bytes of padding still to come.
        case padding(DataFrame, count: Int)
        /// The frame is over: its `END_STREAM` is reported next.
        case ended(HTTP2StreamID)
        /// After a connection error: nothing more is read.
        case failed
    }

    private var state = State.header(partial: [])
    private var emptyDataFrames = 0

    /// The next piece of `bytes` (which it consumes), or `nil` when it needs more.
    ///
    /// - Parameters:
    ///   - bytes: what the connection received, taken from its reader index on.
    ///   - ours: whether `DATA` on a stream is taken apart (the streams this client opened).
    mutating func next(_ bytes: inout ByteBuffer, ours: (HTTP2StreamID) -> Bool) -> Piece? {
        switch state {
        case .failed:
            bytes.moveReaderIndex(to: bytes.writerIndex)
            return nil
        case .ended(let stream):
            state = .header(partial: [])
            return .endStream(stream)
        case .forwarding(let count):
            guard bytes.readableBytes > 0 else { return nil }
            return forward(&bytes, count: count)
        case .padLength(let frame):
            guard let padLength = bytes.readInteger(as: UInt8.self) else { return nil }
            let padding = Int(padLength) + 1
            guard padding <= frame.length else { return fail(.protocolError) }
            return begin(frame, padding: padding)
        case .payload(let frame, let count, let padding):
            guard bytes.readableBytes > 0 else { return nil }
            let taken = min(count, bytes.readableBytes)
            // A slice of the reader's buffer: the bytes are not copied.
            let slice = bytes.readSlice(length: taken)!
            advance(frame, payloadLeft: count - taken, padding: padding)
            return .payload(frame.stream, slice)
        case .padding(let frame, let count):
            guard bytes.readableBytes > 0 else { return nil }
            let taken = min(count, bytes.readableBytes)
            bytes.moveReaderIndex(forwardBy: taken)
            advance(frame, payloadLeft: 0, padding: count - taken)
            return next(&bytes, ours: ours)
        case .header(let partial):
            return header(partial, &bytes, ours: ours)
        }
    }

    private mutating func header(
        _ partial: [UInt8],
        _ bytes: inout ByteBuffer,
        ours: (HTTP2StreamID) -> Bool
    ) -> Piece? {
        // The header is read in place when it is whole in `bytes` (it is then still there to
        // forward with its payload); put together from `partial` otherwise.
        let header: FrameHeader
        if partial.isEmpty && bytes.readableBytes >= Self.headerLength {
            header = FrameHeader(bytes, at: bytes.readerIndex)
            guard takesApart(header, ours: ours) else {
                return forward(&bytes, count: Self.headerLength + header.length)
            }
            bytes.moveReaderIndex(forwardBy: Self.headerLength)
        } else {
            let wanted = Self.headerLength - partial.count
            let more = bytes.readBytes(length: min(wanted, bytes.readableBytes)) ?? []
            guard more.count == wanted else {
                state = .header(partial: partial + more)
                return nil
            }
            let assembled = ByteBuffer(bytes: partial + more)
            header = FrameHeader(assembled, at: 0)
            guard takesApart(header, ours: ours) else {
                state = header.length > 0 ? .forwarding(count: header.length) : .header(partial: [])
                return .forward(assembled)
            }
        }
        let frame = DataFrame(
            stream: header.stream,
            length: header.length,
            endStream: header.flags & Self.endStreamFlag != 0
        )
        if header.flags & Self.paddedFlag != 0 {
            guard header.length > 0 else { return fail(.frameSizeError) }
            state = .padLength(frame)
            return next(&bytes, ours: ours)
        }
        return begin(frame, padding: 0)
    }

    /// Whether the frame `header` begins is taken apart: `DATA` of a stream `ours` accepts,
    /// within ``maximumFrameSize``. A `HEADERS` frame ends a run of empty `DATA` frames.
    private mutating func takesApart(_ header: FrameHeader, ours: (HTTP2StreamID) -> Bool) -> Bool {
        if header.type == Self.headersType { emptyDataFrames = 0 }
        return header.type == Self.dataType && header.stream != .rootStream
            && header.length <= Self.maximumFrameSize && ours(header.stream)
    }

    /// Reports a `DATA` frame whose payload follows.
    private mutating func begin(_ frame: DataFrame, padding: Int) -> Piece {
        if frame.length == padding, !frame.endStream {
            emptyDataFrames += 1
            if emptyDataFrames > Self.maximumSequentialEmptyDataFrames { return fail(.enhanceYourCalm) }
        } else {
            emptyDataFrames = 0
        }
        advance(frame, payloadLeft: frame.length - padding, padding: padding == 0 ? 0 : padding - 1)
        return .dataFrame(frame.stream, flowControlled: frame.length, padding: padding, endStream: frame.endStream)
    }

    private mutating func advance(_ frame: DataFrame, payloadLeft: Int, padding: Int) {
        if payloadLeft > 0 {
            state = .payload(frame, count: payloadLeft, padding: padding)
        } else if padding > 0 {
            state = .padding(frame, count: padding)
        } else {
            state = frame.endStream ? .ended(frame.stream) : .header(partial: [])
        }
    }

    /// Up to `count` bytes of the frame being forwarded, with any frames after them in
    /// `bytes` that are forwarded too (one piece for a run of control frames).
    private mutating func forward(_ bytes: inout ByteBuffer, count: Int) -> Piece {
        var end = min(count, bytes.readableBytes)
        var left = count - end
        // Whole frames that follow, for NIOHTTP2Handler as well: one piece, not one each.
        while left == 0, bytes.readableBytes - end >= Self.headerLength {
            let header = FrameHeader(bytes, at: bytes.readerIndex + end)
            guard header.type != Self.dataType else { break }
            if header.type == Self.headersType { emptyDataFrames = 0 }
            let frame = Self.headerLength + header.length
            let taken = min(frame, bytes.readableBytes - end)
            end += taken
            left = frame - taken
        }
        state = left > 0 ? .forwarding(count: left) : .header(partial: [])
        return .forward(bytes.readSlice(length: end)!)
    }

    private mutating func fail(_ code: HTTP2ErrorCode) -> Piece {
        state = .failed
        return .connectionError(code)
    }
}
