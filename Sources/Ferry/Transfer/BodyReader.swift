import NIOCore

/// The one loop that reads a response body, whatever takes its bytes: a file at an offset
/// (``BodyWriter``), a pipe in order (the in-order download), memory (a data task), a
/// streamed reader (`bytes(for:)`), the interceptor's buffers.
///
/// It waits while the task is suspended, takes each buffer as the body's throttle allows
/// (``ResponseBody``), drops the bytes a server repeated before the offset asked for,
/// refuses bytes past what the headers announced and past the size limit, and hands the
/// rest to the consumer. A value: one per body.
///
/// ```swift
/// var reader = BodyReader(task: task, announced: head.expectedContentLength, limit: .memory(limit), head: head)
/// try await reader.read(body) { chunk in data.append(contentsOf: chunk.readableBytesView) }
/// ```
struct BodyReader {
    /// The size a body may not grow past: the one place the configured limits are enforced.
    enum SizeLimit: Sendable, Equatable {
        /// ``SessionConfiguration/maximumFileSize``: no byte of the file at or past it; the
        /// body is written from `offset`.
        case file(Int64, from: Int64)
        /// ``SessionConfiguration/maximumInMemoryBodySize``: what a data task, an error
        /// response or an upgrade's answer keeps in memory.
        case memory(Int64)

        /// A limit of `maximum` bytes, or none.
        static func file(_ maximum: Int64?, from offset: Int64 = 0) -> SizeLimit? {
            maximum.map { .file($0, from: offset) }
        }

        var maximum: Int64 {
            switch self {
            case .file(let maximum, _), .memory(let maximum): maximum
            }
        }

        /// Refuses a body whose announced `length` is past the limit, before any of it is read.
        func refuse(announced length: Int64?, head: HTTPResponse?) throws(FerryError) {
            guard let length else { return }
            try check(length, head: head, announced: true)
        }

        /// Refuses `bytes` read so far when they pass the limit.
        func check(_ bytes: Int64, head: HTTPResponse?, announced: Bool = false) throws(FerryError) {
            switch self {
            case .file(let maximum, let offset):
                guard offset + bytes > maximum else { return }
                throw FerryError(
                    .bodyTooLarge(limit: maximum),
                    announced
                        ? "The file is \(offset + bytes) bytes, more than the \(maximum)-byte limit (maximumFileSize)."
                        : "The file grows past the \(maximum)-byte limit (maximumFileSize).",
                    response: head
                )
            case .memory(let maximum):
                guard bytes > maximum else { return }
                throw FerryError(
                    .bodyTooLarge(limit: maximum),
                    "The response body is larger than \(maximum) bytes (maximumInMemoryBodySize); use a download task.",
                    response: head
                )
            }
        }
    }

    /// The task whose suspension pauses the loop; `nil` for a body nobody waits on.
    var task: SessionTask?
    /// Bytes the server repeated before the offset asked for, dropped unread.
    var skip: Int64 = 0
    /// Bytes the headers announced: more is the server's error, fewer too when
    /// `requiresAnnounced`.
    var announced: Int64?
    /// Whether a body that ends short of `announced` is an error here (where the engine's
    /// framing does not already say so: a decoded or streamed body).
    var requiresAnnounced = false
    var limit: SizeLimit?
    /// The response the body belongs to, for the errors.
    var head: HTTPResponse?
    /// A `br` or `zstd` body decoded on its way to the consumer (``Decoding/make(for:_:)``);
    /// `announced` is then `nil` (it counts the coded bytes) and `read` counts decoded ones.
    var decoding: Decoding?
    /// Bytes handed on so far.
    private(set) var read: Int64 = 0
    /// The trailer fields the body ended with, once read (Ferry's own HTTP/2 connections
    /// report them).
    private(set) var trailers: HeaderFields?

    /// Publishes ``trailers`` as the task's ``TaskEvent/trailers(_:)``: called by the
    /// consumer once its last progress event is out, so that the event follows the body's.
    func publishTrailers() {
        if let task, let trailers { task.client.publish(.trailers(trailers)) }
    }

    /// The decoder of a `br` or `zstd` body, and the most it may decode to: a data task's
    /// ``SessionConfiguration/maximumInMemoryBodySize``, the cap AsyncHTTPClient holds a
    /// `gzip` or `deflate` body it decodes to (whatever its ratio).
    struct Decoding {
        let decoder: StreamingDecoder
        let maximum: Int64
        /// Coded bytes read.
        var coded: Int64 = 0

        /// The decoding of `head`'s body when the session decodes bodies
        /// (``SessionConfiguration/automaticDecompression``) and it is `br` or `zstd`;
        /// AsyncHTTPClient decodes `gzip` and `deflate` itself.
        static func make(for head: HTTPResponse, _ configuration: SessionConfiguration) throws(FerryError) -> Decoding?
        {
            guard configuration.automaticDecompression, let name = ContentDecoder.coding(of: head),
                let coding = StreamingDecoder.Coding(rawValue: name)
            else { return nil }
            return Decoding(decoder: try StreamingDecoder(coding), maximum: configuration.maximumInMemoryBodySize)
        }

        /// `chunk` decoded, refused past ``maximum``.
        mutating func decode(_ chunk: ByteBuffer, after handedOn: Int64) throws -> ByteBuffer {
            coded += Int64(chunk.readableBytes)
            var decoded = ByteBuffer()
            let maximum = maximum
            let coding = decoder.coding.rawValue
            try chunk.withUnsafeReadableBytes { bytes in
                try decoder.decode(bytes) { piece in
                    guard handedOn + Int64(decoded.readableBytes + piece.count) <= maximum else {
                        throw FerryError(
                            .bodyTooLarge(limit: maximum),
                            "The \(coding) body inflates past \(maximum) bytes (maximumInMemoryBodySize)."
                        )
                    }
                    decoded.writeBytes(piece)
                }
            }
            return decoded
        }

        /// The end of the body: a coded stream must have ended with it (an empty body is
        /// empty, whatever its coding says).
        func finish() throws(FerryError) {
            if coded > 0 { try decoder.finish() }
        }
    }

    /// Reads `body` to its end, handing every byte wanted to `consume` in order.
    ///
    /// - Throws: ``FerryError/Reason/badServerResponse`` for bytes past (or, with
    ///   `requiresAnnounced`, short of) the announced length;
    ///   ``FerryError/Reason/bodyTooLarge(limit:)`` past the limit; the body's, the task's
    ///   (cancellation) and `consume`'s errors.
    mutating func read(_ body: ResponseBody, _ consume: (ByteBuffer) async throws -> Void) async throws {
        var iterator = body.makeAsyncIterator()
        while true {
            try await task?.client.waitWhilePaused()
            guard var chunk = try await iterator.next() else { break }
            if skip > 0 {
                let dropped = Int(min(skip, Int64(chunk.readableBytes)))
                chunk.moveReaderIndex(forwardBy: dropped)
                skip -= Int64(dropped)
            }
            if decoding != nil, chunk.readableBytes > 0 { chunk = try decoding!.decode(chunk, after: read) }
            let count = Int64(chunk.readableBytes)
            guard count > 0 else { continue }
            if let announced, read + count > announced {
                throw FerryError(.badServerResponse, "The server sent more bytes than its headers announced.")
            }
            try limit?.check(read + count, head: head)
            try await consume(chunk)
            read += count
        }
        try decoding?.finish()
        if let fields = body.trailers, !fields.isEmpty {
            trailers = HeaderFields(fields.map { (name: $0.name, value: $0.value) })
        }
        if requiresAnnounced, let announced, read < announced {
            throw FerryError(
                .badServerResponse,
                "The body ended after \(read) of \(announced) bytes.",
                response: head
            )
        }
    }
}
