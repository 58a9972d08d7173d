import Foundation
import NIOCore
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A request body that is produced lazily, in bounded chunks, as the connection asks.
///
/// `Data`, file and provided bodies can be produced again from the start (for 307 / 308
/// redirects and authentication challenges); a stream body is one-shot. A file is read
/// 256 KiB at a time and never loaded whole.
enum RequestBody: Sendable {
    case data(Data)
    case file(URL, length: Int64)
    case stream(ByteChunks, length: Int64?)
    /// A fresh stream from the caller's provider each time the body is sent (URLSession's
    /// `needNewBodyStream`).
    case provided(ByteChunks, length: Int64?)
    case multipart(MultipartFormData)

    static let chunkSize = 256 * 1024

    /// The body's length, or `nil` for a stream of unknown length (sent chunked).
    var length: Int64? {
        switch self {
        case .data(let data): Int64(data.count)
        case .file(_, let length): length
        case .stream(_, let length), .provided(_, let length): length
        case .multipart(let form): form.contentLength
        }
    }

    var isReplayable: Bool {
        switch self {
        case .stream: false
        case .multipart(let form): form.isReplayable
        case .data, .file, .provided: true
        }
    }

    /// The body of `request` as Foundation holds it: `httpBody`, or `httpBodyStream` (read
    /// once, in order; its length from the request's `Content-Length`, or sent chunked).
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` for a `Content-Length` that is not a
    ///   length.
    static func of(_ request: URLRequest) throws(FerryError) -> RequestBody? {
        if let data = request.httpBody { return .data(data) }
        guard let stream = request.httpBodyStream else { return nil }
        var length: Int64?
        if let field = request.value(forHTTPHeaderField: "Content-Length") {
            guard let value = Int64(field.trimmingCharacters(in: .whitespaces)), value >= 0 else {
                throw FerryError(.invalidRequest, "The request's Content-Length '\(field)' is not a length.")
            }
            length = value
        }
        return .stream(.oneShot(InputStreamChunks(stream)), length: length)
    }

    /// A body for a file whose size is read now, once.
    static func file(at url: URL) throws -> RequestBody {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            throw FerryError(.uploadBodyFailed, "Cannot read '\(url.path)': \(String(cString: strerror(errno))).")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw FerryError(.uploadBodyFailed, "'\(url.path)' is not a regular file.")
        }
        return .file(url, length: Int64(info.st_size))
    }

    /// `count` bytes of the body (the rest when `nil`) from `offset`, for a resumable upload's
    /// append: a file is read from there; other replayable bodies are produced from the start
    /// and their first `offset` bytes dropped.
    func chunks(from offset: Int64, count: Int64?) -> ByteChunks {
        if case .file(let url, let length) = self {
            return ByteChunks {
                let reader = FileChunkReader(url: url, expectedLength: length, offset: offset, count: count)
                return ByteChunks.Iterator { try reader.next() }
            }
        }
        let whole = chunks()
        return ByteChunks {
            var base = whole.makeAsyncIterator()
            var skip = offset
            var left = count ?? .max
            return ByteChunks.Iterator {
                while left > 0, var chunk = try await base.next() {
                    if skip > 0 {
                        let dropped = min(skip, Int64(chunk.readableBytes))
                        chunk.moveReaderIndex(forwardBy: Int(dropped))
                        skip -= dropped
                    }
                    guard chunk.readableBytes > 0 else { continue }
                    if Int64(chunk.readableBytes) > left { chunk.moveWriterIndex(to: chunk.readerIndex + Int(left)) }
                    left -= Int64(chunk.readableBytes)
                    return chunk
                }
                return nil
            }
        }
    }

    /// The chunks of the body, from the start.
    func chunks() -> ByteChunks {
        switch self {
        case .data(let data):
            return ByteChunks {
                var offset = 0
                return ByteChunks.Iterator {
                    guard offset < data.count else { return nil }
                    let end = min(offset + Self.chunkSize, data.count)
                    defer { offset = end }
                    return ByteBuffer(bytes: data[data.startIndex + offset..<data.startIndex + end])
                }
            }
        case .file(let url, let length):
            return ByteChunks {
                let reader = FileChunkReader(url: url, expectedLength: length)
                return ByteChunks.Iterator { try reader.next() }
            }
        case .stream(let chunks, _), .provided(let chunks, _):
            return chunks
        case .multipart(let form):
            return form.chunks()
        }
    }
}

/// A type-erased, `Sendable` async sequence of byte buffers.
struct ByteChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    struct Iterator: AsyncIteratorProtocol {
        let produce: () async throws -> ByteBuffer?
        mutating func next() async throws -> ByteBuffer? { try await produce() }
    }

    let makeIterator: @Sendable () -> Iterator

    init(_ makeIterator: @escaping @Sendable () -> Iterator) { self.makeIterator = makeIterator }

    func makeAsyncIterator() -> Iterator { makeIterator() }

    /// Wraps a caller's sequence so it can be iterated once; a second iteration throws
    /// ``FerryError/Reason/bodyNotReplayable``.
    static func oneShot<Source: AsyncSequence & Sendable>(_ source: Source) -> ByteChunks
    where Source.Element: DataProtocol {
        let used = Mutex(false)
        return ByteChunks {
            let first = used.withLock { used in
                defer { used = true }
                return !used
            }
            guard first else {
                return Iterator {
                    throw FerryError(.bodyNotReplayable, "A stream body can be sent only once.")
                }
            }
            return buffers(of: source.makeAsyncIterator())
        }
    }

    /// A body that asks `provider` for a new sequence each time it is sent from the start.
    static func provided<Source: AsyncSequence & Sendable>(
        by provider: @escaping @Sendable () async throws -> Source
    ) -> ByteChunks where Source.Element: DataProtocol {
        ByteChunks {
            var current: Iterator?
            return Iterator {
                if current == nil {
                    do {
                        current = buffers(of: try await provider().makeAsyncIterator())
                    } catch {
                        throw FerryError(.uploadBodyFailed, "The body provider failed.", underlying: error)
                    }
                }
                return try await current?.next()
            }
        }
    }

    /// The elements of `iterator` as byte buffers, empty ones skipped.
    private static func buffers<Base: AsyncIteratorProtocol>(of iterator: Base) -> Iterator
    where Base.Element: DataProtocol {
        var iterator = iterator
        return Iterator {
            while let element = try await iterator.next() {
                if element.isEmpty { continue }
                var buffer = ByteBuffer()
                buffer.writeBytes(element)
                return buffer
            }
            return nil
        }
    }
}

/// Reads a file in chunks; checks that the file still has the length seen when the body was
/// made, so a file that changed size is an error rather than a wrong body.
final class FileChunkReader {
    private let url: URL
    private let expectedLength: Int64
    private var descriptor: Int32 = -1
    private let start: Int64
    private var remaining: Int64

    /// A reader of `count` bytes (the rest when `nil`) from `offset`.
    init(url: URL, expectedLength: Int64, offset: Int64 = 0, count: Int64? = nil) {
        self.url = url
        self.expectedLength = expectedLength
        self.start = offset
        self.remaining = max(0, min(count ?? .max, expectedLength - offset))
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    func next() throws -> ByteBuffer? {
        if descriptor == -2 { return nil }
        if descriptor == -1 {
            descriptor = open(url.path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { throw failure("cannot be opened") }
            var info = stat()
            guard fstat(descriptor, &info) == 0, Int64(info.st_size) == expectedLength else {
                throw FerryError(
                    .uploadBodyFailed,
                    "'\(url.path)' changed size after the upload was created (expected \(expectedLength) bytes)."
                )
            }
            guard start == 0 || lseek(descriptor, off_t(start), SEEK_SET) == off_t(start) else {
                throw failure("cannot be read from byte \(start)")
            }
        }
        guard remaining > 0 else {
            close(descriptor)
            descriptor = -2
            return nil
        }
        let wanted = Int(min(Int64(RequestBody.chunkSize), remaining))
        var buffer = ByteBuffer()
        buffer.reserveCapacity(wanted)
        var readError: Int32 = 0
        let count = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: wanted) { pointer in
            while true {
                let result = read(descriptor, pointer.baseAddress, wanted)
                if result < 0 && errno == EINTR { continue }
                if result < 0 { readError = errno }
                return max(result, 0)
            }
        }
        if readError != 0 { throw failure(String(cString: strerror(readError))) }
        guard count > 0 else {
            throw FerryError(.uploadBodyFailed, "'\(url.path)' became shorter while it was being sent.")
        }
        remaining -= Int64(count)
        return buffer
    }

    private func failure(_ what: String) -> FerryError {
        FerryError(.uploadBodyFailed, "'\(url.path)' \(what).")
    }
}
