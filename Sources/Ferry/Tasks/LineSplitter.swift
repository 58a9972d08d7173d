import NIOCore

/// Splits bytes into lines at `\n`, dropping a `\r` before it, and decodes them as UTF-8
/// (invalid sequences repaired): the value behind ``ResponseBytes/lines``, with no I/O.
///
/// Bytes are appended as they arrive; ``nextLine()`` returns each complete line once,
/// ``finish()`` the last one when it has no `\n`. A line longer than `maximumLength` bytes
/// throws instead of growing without end.
struct LineSplitter {
    let maximumLength: Int
    private var pending: [UInt8] = []
    /// Where the search for the next `\n` starts in `pending` (what is before it has none).
    private var searched = 0
    private var start = 0

    init(maximumLength: Int) { self.maximumLength = maximumLength }

    mutating func append(_ chunk: ByteBuffer) {
        if start > 0 {
            pending.removeFirst(start)
            searched -= start
            start = 0
        }
        pending.append(contentsOf: chunk.readableBytesView)
    }

    /// The next complete line, or `nil` when the bytes so far hold none.
    mutating func nextLine() throws(FerryError) -> String? {
        guard let newline = pending[searched...].firstIndex(of: UInt8(ascii: "\n")) else {
            searched = pending.count
            if pending.count - start > maximumLength { throw tooLong }
            return nil
        }
        var end = newline
        if end > start, pending[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        if end - start > maximumLength { throw tooLong }
        let line = String(decoding: pending[start..<end], as: UTF8.self)
        start = newline + 1
        searched = start
        return line
    }

    /// The last line, if bytes are left without a `\n` after them.
    mutating func finish() -> String? {
        guard start < pending.count else { return nil }
        var end = pending.count
        if pending[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        defer {
            pending = []
            start = 0
            searched = 0
        }
        return String(decoding: pending[start..<end], as: UTF8.self)
    }

    private var tooLong: FerryError {
        FerryError(
            .bodyTooLarge(limit: Int64(maximumLength)),
            "A line of the response is longer than \(maximumLength) bytes."
        )
    }
}
