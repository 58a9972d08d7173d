import NIOCore

/// A request body that reports each chunk to its task as the connection takes it.
struct CountingChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: ByteChunks
    let task: SessionTask
    /// The body's length when known: the client stops asking once it has that many bytes,
    /// so the last progress event goes out with the last chunk, not at the end of the
    /// sequence.
    var length: Int64?

    struct Iterator: AsyncIteratorProtocol {
        var base: ByteChunks.Iterator
        let task: SessionTask
        let length: Int64?
        var throttle = ProgressThrottle()
        var sent: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            try await task.waitWhilePaused()
            if let chunk = try await base.next() {
                let count = Int64(chunk.readableBytes)
                sent += count
                var due = throttle.add(count)
                if due == nil, let length, sent >= length { due = throttle.flush() }
                task.didSend(bytes: count, publish: due != nil, unpublished: due ?? 0)
                return chunk
            }
            if let rest = throttle.flush() { task.didSend(bytes: 0, publish: true, unpublished: rest) }
            return nil
        }
    }

    func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), task: task, length: length) }
}
