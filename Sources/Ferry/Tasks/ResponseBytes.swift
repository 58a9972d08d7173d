public import Foundation
import NIOCore
import Synchronization

/// The body of a streamed response, read as it arrives: bytes (like URLSession's
/// `AsyncBytes`), ``chunks`` of `Data`, or ``lines``.
///
/// Made by ``Session/bytes(for:)``. Memory stays bounded however large the body: the
/// transfer reads from the connection only as fast as the body is read here (a few chunks
/// of read-ahead), so a slow reader slows the server down through TCP. A reader that stops
/// (drops the sequence or its iterator, or whose Swift task is cancelled) stops the transfer:
/// the task is cancelled. The task completes, and the sequence ends, after the last byte;
/// an error after the head is thrown by the iterator as a ``FerryError``.
///
/// The body can be read once: a second iterator throws ``FerryError/Reason/invalidRequest``.
///
/// ```swift
/// let (bytes, response) = try await session.bytes(from: url)
/// guard response.statusCode == 200 else { return }
/// for try await line in bytes.lines { handle(line) }
/// ```
public struct ResponseBytes: AsyncSequence, Sendable {
    public typealias Element = UInt8
    public typealias Failure = FerryError

    /// The data task that carries the body: its progress, metrics, and `cancel()`.
    public let task: DataTask
    private let reader: Reader

    init(task: DataTask, sink: ResponseStreamSink) {
        self.task = task
        self.reader = Reader(sink.takeSequence())
    }

    /// The body in the chunks it arrives in (up to about 128 KiB each).
    public var chunks: Chunks { Chunks(reader: reader) }

    /// The body as lines of UTF-8 text split at `\n` (a `\r` before it is dropped), at most
    /// 8 MiB each; see ``lines(maximumLength:)``.
    public var lines: Lines { lines(maximumLength: 8 << 20) }

    /// The body as lines of UTF-8 text split at `\n`, a `\r` before it dropped; a last line
    /// without `\n` is a line too. Invalid UTF-8 is repaired with U+FFFD.
    ///
    /// - Parameter maximumLength: The longest line accepted, in bytes; a longer one throws
    ///   ``FerryError/Reason/bodyTooLarge(limit:)`` (a server that never sends a newline
    ///   cannot fill memory).
    public func lines(maximumLength: Int) -> Lines { Lines(chunks: chunks, maximumLength: maximumLength) }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(chunks: reader.take()) }

    /// Reads the body one byte at a time, from the chunk at hand.
    public struct AsyncIterator: AsyncIteratorProtocol {
        /// One byte of the body.
        public typealias Element = UInt8
        public typealias Failure = FerryError

        private var chunks: ChunkIterator
        private var buffer = ByteBuffer()

        init(chunks: ChunkIterator) { self.chunks = chunks }

        public mutating func next() async throws(FerryError) -> UInt8? {
            while true {
                if let byte = buffer.readInteger(as: UInt8.self) { return byte }
                guard let chunk = try await chunks.next() else { return nil }
                buffer = chunk
            }
        }
    }

    /// The body in the chunks it arrives in.
    public struct Chunks: AsyncSequence, Sendable {
        public typealias Element = Data
        public typealias Failure = FerryError
        fileprivate let reader: Reader

        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: reader.take()) }

        public struct AsyncIterator: AsyncIteratorProtocol {
            /// A chunk of the body, as it arrived.
            public typealias Element = Data
            public typealias Failure = FerryError
            private var base: ChunkIterator

            init(base: ChunkIterator) { self.base = base }

            public mutating func next() async throws(FerryError) -> Data? {
                guard let chunk = try await base.next() else { return nil }
                return Data(chunk.readableBytesView)
            }
        }
    }

    /// The body as lines of UTF-8 text.
    public struct Lines: AsyncSequence, Sendable {
        public typealias Element = String
        public typealias Failure = FerryError
        fileprivate let chunks: Chunks
        fileprivate let maximumLength: Int

        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(base: chunks.reader.take(), maximumLength: maximumLength)
        }

        public struct AsyncIterator: AsyncIteratorProtocol {
            /// A line of the body, without its line break.
            public typealias Element = String
            public typealias Failure = FerryError
            private var base: ChunkIterator
            private var splitter: LineSplitter

            init(base: ChunkIterator, maximumLength: Int) {
                self.base = base
                self.splitter = LineSplitter(maximumLength: maximumLength)
            }

            public mutating func next() async throws(FerryError) -> String? {
                while true {
                    if let line = try splitter.nextLine() { return line }
                    guard let chunk = try await base.next() else { return splitter.finish() }
                    splitter.append(chunk)
                }
            }
        }
    }
}

/// The body's one producer sequence, handed to the first iterator that asks.
private final class Reader: Sendable {
    private let sequence: Mutex<ResponseStreamSink.Producer?>

    init(_ sequence: ResponseStreamSink.Producer?) { self.sequence = Mutex(sequence) }

    func take() -> ChunkIterator {
        let taken = sequence.withLock { sequence in
            defer { sequence = nil }
            return sequence
        }
        return ChunkIterator(base: taken?.makeAsyncIterator())
    }
}

/// The producer's iterator with its errors typed; without one (the body was already being
/// read), it throws.
struct ChunkIterator {
    private var base: ResponseStreamSink.Producer.AsyncIterator?
    private var readTwice: Bool

    init(base: ResponseStreamSink.Producer.AsyncIterator?) {
        self.base = base
        self.readTwice = base == nil
    }

    mutating func next() async throws(FerryError) -> ByteBuffer? {
        guard let base else {
            guard readTwice else { return nil }
            readTwice = false
            throw FerryError(.invalidRequest, "The body of a streamed response can be read once.")
        }
        do {
            guard let chunk = try await base.next() else {
                self.base = nil
                return nil
            }
            return chunk
        } catch {
            self.base = nil
            throw FerryError.mapping(error)
        }
    }
}
