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
    /// The bandwidth limits, if any: a chunk is handed over once the limit allows it.
    var throttle: Throttle?

    struct Iterator: AsyncIteratorProtocol {
        var base: ByteChunks.Iterator
        let task: SessionTask
        let length: Int64?
        let throttle: Throttle?
        var meter: ProgressMeter
        var sent: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            try await task.client.waitWhilePaused()
            if let chunk = try await base.next() {
                let count = Int64(chunk.readableBytes)
                try await throttle?.pace(count)
                sent += count
                meter.add(count, last: length.map { sent >= $0 } ?? false)
                return chunk
            }
            meter.finish()
            return nil
        }
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(
            base: base.makeAsyncIterator(),
            task: task,
            length: length,
            throttle: throttle,
            meter: ProgressMeter(task: task, direction: .sent)
        )
    }
}
