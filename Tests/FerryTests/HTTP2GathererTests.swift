import NIOCore
import NIOHTTP2
import Testing

@testable import Ferry

@Suite("HTTP2Gatherer")
struct HTTP2GathererTests {
    typealias Delivered = [(stream: Int32, bytes: [UInt8])]

    static func payload(_ count: Int, from start: Int = 0) -> ByteBuffer {
        ByteBuffer(bytes: (start..<start + count).map { UInt8($0 % 251) })
    }

    @Test func aStreamsPayloadIsHandedOnInBuffersOfItsSizeAndInOrder() {
        var gatherer = HTTP2Gatherer(allocator: ByteBufferAllocator())
        var delivered: Delivered = []
        let deliver = { (id: HTTP2StreamID, buffer: ByteBuffer) in
            delivered.append((Int32(id), [UInt8](buffer: buffer)))
        }
        let frame = 8 << 10
        let frames = HTTP2Gatherer.size / frame * 2 + 3
        for index in 0..<frames { gatherer.add(Self.payload(frame, from: index * frame), of: 1, deliver: deliver) }
        // Two full buffers so far; the rest waits for the read's end.
        #expect(delivered.map(\.bytes.count) == [HTTP2Gatherer.size, HTTP2Gatherer.size])
        gatherer.flush(nil, deliver)
        #expect(delivered.map(\.bytes.count) == [HTTP2Gatherer.size, HTTP2Gatherer.size, 3 * frame])
        #expect(delivered.allSatisfy { $0.stream == 1 })
        #expect(delivered.flatMap(\.bytes) == [UInt8](buffer: Self.payload(frames * frame)))
    }

    @Test func anotherStreamsPayloadHandsOnWhatWasGathered() {
        var gatherer = HTTP2Gatherer(allocator: ByteBufferAllocator())
        var delivered: Delivered = []
        let deliver = { (id: HTTP2StreamID, buffer: ByteBuffer) in
            delivered.append((Int32(id), [UInt8](buffer: buffer)))
        }
        gatherer.add(ByteBuffer(bytes: [1, 2]), of: 1, deliver: deliver)
        gatherer.add(ByteBuffer(bytes: [3]), of: 1, deliver: deliver)
        gatherer.add(ByteBuffer(bytes: [4]), of: 3, deliver: deliver)
        #expect(delivered.count == 1 && delivered[0].stream == 1 && delivered[0].bytes == [1, 2, 3])
        // Another stream's flush hands on nothing; its own does.
        gatherer.flush(1, deliver)
        #expect(delivered.count == 1)
        gatherer.flush(3, deliver)
        #expect(delivered.count == 2 && delivered[1].stream == 3 && delivered[1].bytes == [4])
        gatherer.flush(nil, deliver)
        #expect(delivered.count == 2)
    }

    /// A buffer is filled again only once its reader dropped it; one still held is never
    /// written into (its reader's bytes stay as they were).
    @Test func aBufferItsReaderStillHoldsIsNeverWrittenInto() {
        var gatherer = HTTP2Gatherer(allocator: ByteBufferAllocator())
        var held: [ByteBuffer] = []
        let frame = Self.payload(HTTP2Gatherer.size)
        for round in 0..<(HTTP2Gatherer.spareCount * 3) {
            var changed = frame
            changed.setInteger(UInt8(round % 251), at: 0)
            gatherer.add(changed, of: 1) { held.append($1) }
        }
        gatherer.flush(nil) { held.append($1) }
        #expect(held.count == HTTP2Gatherer.spareCount * 3)
        for (round, buffer) in held.enumerated() {
            #expect(buffer.getInteger(at: 0, as: UInt8.self) == UInt8(round % 251), "round \(round)")
            #expect(buffer.readableBytes == HTTP2Gatherer.size)
        }
    }
}
