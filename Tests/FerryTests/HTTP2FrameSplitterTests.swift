import NIOCore
import NIOHTTP2
import Testing

@testable import Ferry

@Suite("HTTP2FrameSplitter")
struct HTTP2FrameSplitterTests {
    typealias Piece = HTTP2FrameSplitter.Piece

    /// What the pieces say, with runs of forwarded bytes and of one frame's payload joined
    /// (how the bytes were split across reads changes how many pieces there are, never
    /// what they add up to).
    enum Seen: Equatable {
        case forward([UInt8])
        case dataFrame(Int32, flowControlled: Int, padding: Int, endStream: Bool)
        case payload(Int32, [UInt8])
        case endStream(Int32)
        case connectionError(HTTP2ErrorCode)
    }

    /// One frame's bytes (RFC 9113 §4.1).
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        let id = stream.bigEndian
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
            + withUnsafeBytes(of: id) { Array($0) } + payload
    }

    static func data(_ stream: UInt32, _ payload: [UInt8], endStream: Bool = false, pad: Int? = nil) -> [UInt8] {
        let end: UInt8 = endStream ? 0x1 : 0
        guard let pad else { return frame(0x0, flags: end, stream: stream, payload) }
        return frame(0x0, flags: end | 0x8, stream: stream, [UInt8(pad)] + payload + [UInt8](repeating: 0, count: pad))
    }

    static let settings = frame(0x4, stream: 0, [0, 3, 0, 0, 0, 100])
    static let headers = frame(0x1, flags: 0x4, stream: 1, [0x88])  // :status 200, END_HEADERS
    static let windowUpdate = frame(0x8, stream: 0, [0, 0, 0x10, 0])
    static let body = (0..<3000).map { UInt8($0 % 251) }

    /// Runs `chunks` through a splitter that owns the odd streams below 5.
    static func split(_ chunks: [[UInt8]]) -> [Seen] {
        var splitter = HTTP2FrameSplitter()
        var seen: [Seen] = []
        for chunk in chunks {
            var bytes = ByteBuffer(bytes: chunk)
            while let piece = splitter.next(&bytes, ours: { Int32($0) % 2 == 1 && Int32($0) < 5 }) {
                seen.join(piece)
            }
            #expect(bytes.readableBytes == 0, "a piece left bytes unread")
        }
        return seen
    }

    /// Every split of `bytes` in two, and byte by byte, gives what the whole does.
    static func expectSameAtEverySplit(_ bytes: [UInt8], _ expected: [Seen]) {
        #expect(split([bytes]) == expected)
        for offset in 1..<bytes.count {
            let seen = split([Array(bytes[..<offset]), Array(bytes[offset...])])
            #expect(seen == expected, "split at \(offset)")
            if seen != expected { return }
        }
        #expect(split(bytes.map { [$0] }) == expected, "byte by byte")
    }

    @Test func dataOfItsStreamsIsTakenApartAndEveryOtherFrameForwarded() {
        let tail = Array(Self.body[..<100])
        let bytes =
            Self.settings + Self.headers + Self.data(1, Self.body) + Self.windowUpdate
            + Self.data(3, tail, pad: 20) + Self.data(1, [], endStream: true)
            + Self.data(3, tail, endStream: true, pad: 0)
        Self.expectSameAtEverySplit(
            bytes,
            [
                .forward(Self.settings + Self.headers),
                .dataFrame(1, flowControlled: 3000, padding: 0, endStream: false),
                .payload(1, Self.body),
                .forward(Self.windowUpdate),
                .dataFrame(3, flowControlled: 121, padding: 21, endStream: false),
                .payload(3, tail),
                .dataFrame(1, flowControlled: 0, padding: 0, endStream: true),
                .endStream(1),
                .dataFrame(3, flowControlled: 101, padding: 1, endStream: true),
                .payload(3, tail),
                .endStream(3),
            ]
        )
    }

    /// `DATA` the splitter may not take (stream 0, a stream never opened, longer than the
    /// frame size this client allows) goes to `NIOHTTP2Handler` whole, which refuses it.
    @Test func dataItMayNotTakeIsForwardedWhole() {
        for frame in [
            Self.data(0, [1, 2, 3]), Self.data(5, [1, 2, 3]), Self.data(2, [1, 2, 3]),
            Self.data(1, [UInt8](repeating: 7, count: HTTP2FrameSplitter.maximumFrameSize + 1)),
        ] {
            let bytes = frame + Self.headers
            Self.expectSameAtEverySplit(bytes, [.forward(bytes)])
        }
    }

    @Test func paddingAsLongAsThePayloadIsAProtocolError() {
        // Length 4: the pad length byte says 4, which leaves -1 bytes of data (§6.1).
        let bad = Self.frame(0x0, flags: 0x8, stream: 1, [4, 0, 0, 0])
        Self.expectSameAtEverySplit(bad + Self.headers, [.connectionError(.protocolError)])
        // Padding that leaves no data at all is allowed.
        Self.expectSameAtEverySplit(
            Self.frame(0x0, flags: 0x8, stream: 1, [3, 0, 0, 0]),
            [.dataFrame(1, flowControlled: 4, padding: 4, endStream: false)]
        )
    }

    @Test func aPaddedFrameWithNoRoomForItsPadLengthIsAFrameSizeError() {
        Self.expectSameAtEverySplit(
            Self.frame(0x0, flags: 0x8, stream: 1, []) + Self.headers,
            [.connectionError(.frameSizeError)]
        )
    }

    /// `NIOHTTP2Handler`'s protection against a flood of empty frames, kept: one empty
    /// `DATA` frame without `END_STREAM` in a row is allowed, two are not, unless `HEADERS`,
    /// data or an `END_STREAM` come between.
    @Test func emptyDataFramesInARowEndTheConnection() {
        let empty = Self.data(1, [])
        let once = Seen.dataFrame(1, flowControlled: 0, padding: 0, endStream: false)
        Self.expectSameAtEverySplit(empty + empty, [once, .connectionError(.enhanceYourCalm)])
        Self.expectSameAtEverySplit(empty + Self.headers + empty, [once, .forward(Self.headers), once])
        Self.expectSameAtEverySplit(
            empty + Self.data(1, [9]) + empty,
            [once, .dataFrame(1, flowControlled: 1, padding: 0, endStream: false), .payload(1, [9]), once]
        )
        // Padding alone is no payload.
        Self.expectSameAtEverySplit(
            empty + Self.data(1, [], pad: 3),
            [once, .connectionError(.enhanceYourCalm)]
        )
    }

    @Test func afterAConnectionErrorNothingMoreIsRead() {
        var splitter = HTTP2FrameSplitter()
        var bytes = ByteBuffer(bytes: Self.frame(0x0, flags: 0x8, stream: 1, []))
        let first = splitter.next(&bytes, ours: { _ in true })
        #expect(first == .connectionError(.frameSizeError))
        var more = ByteBuffer(bytes: Self.headers + Self.data(1, [1]))
        let after = splitter.next(&more, ours: { _ in true })
        #expect(after == nil)
        #expect(more.readableBytes == 0)
    }
}

extension Array where Element == HTTP2FrameSplitterTests.Seen {
    /// Appends `piece`, joined to the last one when both are forwarded bytes or payload of
    /// the same frame.
    fileprivate mutating func join(_ piece: HTTP2FrameSplitter.Piece) {
        switch (piece, last) {
        case (.forward(let bytes), .forward(let before)?):
            self[count - 1] = .forward(before + [UInt8](buffer: bytes))
        case (.payload(let id, let bytes), .payload(let lastID, let before)?) where Int32(id) == lastID:
            self[count - 1] = .payload(lastID, before + [UInt8](buffer: bytes))
        case (.forward(let bytes), _):
            append(.forward([UInt8](buffer: bytes)))
        case (.payload(let id, let bytes), _):
            append(.payload(Int32(id), [UInt8](buffer: bytes)))
        case (.dataFrame(let id, let length, let padding, let endStream), _):
            append(.dataFrame(Int32(id), flowControlled: length, padding: padding, endStream: endStream))
        case (.endStream(let id), _):
            append(.endStream(Int32(id)))
        case (.connectionError(let code), _):
            append(.connectionError(code))
        }
    }
}
