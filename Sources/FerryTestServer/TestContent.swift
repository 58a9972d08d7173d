import Crypto
public import Foundation
public import NIOCore

/// The deterministic bytes FerryTestServer serves: any size, any offset, never stored.
///
/// Byte `i` of the content with seed `s` depends only on `i` and `s`, so a test can check a
/// download of any size (or any range of it) against ``data(size:seed:range:)`` or
/// ``sha256(size:seed:)`` without the server keeping a file.
public enum TestContent {
    /// The 8 bytes of the word holding offset `word * 8`.
    @inline(__always)
    static func word(_ word: UInt64, seed: UInt64) -> UInt64 {
        // splitmix64: a cheap, well-mixed function of (index, seed).
        var z = word &+ seed &* 0x9E37_79B9_7F4A_7C15 &+ 0x6A09_E667_F3BC_C909
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The byte at `offset`.
    public static func byte(at offset: Int64, seed: UInt64 = 0) -> UInt8 {
        let value = word(UInt64(offset) / 8, seed: seed)
        return UInt8(truncatingIfNeeded: value >> ((UInt64(offset) % 8) * 8))
    }

    /// Writes the bytes `range` of the content into `buffer`.
    public static func write(_ range: Range<Int64>, seed: UInt64 = 0, into buffer: inout ByteBuffer) {
        let count = Int(range.count)
        buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { pointer in
            var index = 0
            var offset = range.lowerBound
            // Unaligned head.
            while index < count && offset % 8 != 0 {
                pointer[index] = byte(at: offset, seed: seed)
                index += 1
                offset += 1
            }
            // Whole words.
            while count - index >= 8 {
                let value = word(UInt64(offset) / 8, seed: seed).littleEndian
                withUnsafeBytes(of: value) { bytes in
                    UnsafeMutableRawBufferPointer(rebasing: pointer[index..<index + 8]).copyMemory(from: bytes)
                }
                index += 8
                offset += 8
            }
            while index < count {
                pointer[index] = byte(at: offset, seed: seed)
                index += 1
                offset += 1
            }
            return count
        }
    }

    /// The bytes `range` (default: all) of content of `size` bytes.
    public static func data(size: Int64, seed: UInt64 = 0, range: Range<Int64>? = nil) -> Data {
        let range = range ?? 0..<size
        var buffer = ByteBuffer()
        write(range, seed: seed, into: &buffer)
        return Data(buffer.readableBytesView)
    }

    /// The SHA-256 of content of `size` bytes, as lower-case hex.
    public static func sha256(size: Int64, seed: UInt64 = 0) -> String {
        var hasher = SHA256()
        var offset: Int64 = 0
        var buffer = ByteBuffer()
        while offset < size {
            let end = min(size, offset + 1 << 20)
            buffer.clear()
            write(offset..<end, seed: seed, into: &buffer)
            buffer.withUnsafeReadableBytes { hasher.update(bufferPointer: $0) }
            offset = end
        }
        return hasher.finalize().hexString
    }
}

extension Digest {
    /// Lower-case hex.
    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
