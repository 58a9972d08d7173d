import NIOCore
import NIOHTTP2

/// Gathers the payload of a connection's `DATA` frames into buffers of ``size`` bytes that
/// it reuses, one stream at a time, and hands each on when it is full, when another
/// stream's payload comes, or when the read is handled: a value with no I/O.
///
/// Why not hand on the frames' slices as they are: a slice kept past the read makes TLS
/// decrypt the next read into new memory (its buffer no longer its own), which the kernel
/// maps in a page fault at a time; it holds a whole read's memory for a frame of it; and the
/// reader gets nginx's 8 KiB frames one by one. One copy instead, into memory that stays
/// warm: TLS reuses its buffer, and a gathered buffer the reader has written and dropped is
/// filled again as it is (``spareCount`` of them are kept; one the reader still holds is
/// replaced by a new one, never written into).
struct HTTP2Gatherer {
    /// What a buffer holds: a ``ResponseStream``'s wake size, half its read-ahead.
    static let size = 128 << 10
    /// Buffers kept for reuse: enough for what a stream reads ahead
    /// (``ResponseStream/readAhead``) and what its reader holds while it writes, at ``size``
    /// each.
    static let spareCount = 10

    private let allocator: ByteBufferAllocator
    private var current: (stream: HTTP2StreamID, buffer: ByteBuffer)?
    /// Buffers handed on, oldest first: the likeliest to be dropped by their reader.
    private var spares = CircularBuffer<ByteBuffer>(initialCapacity: spareCount)

    init(allocator: ByteBufferAllocator) {
        self.allocator = allocator
    }

    /// Adds `payload` of `stream`; `deliver` gets what is handed on meanwhile.
    mutating func add(
        _ payload: ByteBuffer,
        of stream: HTTP2StreamID,
        deliver: (HTTP2StreamID, ByteBuffer) -> Void
    ) {
        // What TLS decrypted, copied: nothing of it is kept. Written in place, from its bytes,
        // so that no buffer is copied out and back (a retain and a release each) for a frame.
        payload.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                if let current, current.stream != stream || current.buffer.writableBytes == 0 { flush(nil, deliver) }
                if current == nil { current = (stream, spare()) }
                let count = min(bytes.count - offset, current!.buffer.writableBytes)
                current!.buffer.writeBytes(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count]))
                offset += count
            }
        }
    }

    /// Hands on what is gathered (of `stream` only, when given).
    mutating func flush(_ stream: HTTP2StreamID? = nil, _ deliver: (HTTP2StreamID, ByteBuffer) -> Void) {
        guard let current, stream == nil || current.stream == stream else { return }
        self.current = nil
        if spares.count == Self.spareCount { spares.removeFirst() }
        spares.append(current.buffer)
        deliver(current.stream, current.buffer)
    }

    /// An empty buffer of ``size``: the oldest one handed on, in its own memory when its
    /// reader dropped it.
    private mutating func spare() -> ByteBuffer {
        guard spares.count == Self.spareCount, var buffer = spares.popFirst() else {
            return allocator.buffer(capacity: Self.size)
        }
        // Still held by its reader: `clear()` gives it memory of its own, never the reader's.
        buffer.clear()
        return buffer
    }
}
