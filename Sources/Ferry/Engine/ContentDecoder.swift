import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPCompression

/// Decodes a complete download's `gzip` or `deflate` body (with NIO's HTTP decompressor),
/// or its `br` or `zstd` body (with the system's libraries, ``StreamingDecoder``), from one
/// partial file into another, streaming, with the same caps on what it inflates to.
///
/// A download stores the body as the server coded it (ranges refer to those bytes), so the
/// decoding happens once every byte is on disk, before the checksum and the move: the
/// caller gets the decoded file or an error, never a file half of either.
package enum ContentDecoder {
    /// The codings decoded: gzip and deflate always, br and zstd where their libraries are.
    static let codings = Set(["gzip", "x-gzip", "deflate"]).union(StreamingDecoder.available.map(\.rawValue))

    /// `Accept-Encoding` for a download that asks for a coded body to be decoded once
    /// complete: only what this machine decodes (`gzip, deflate, br, zstd` where both
    /// libraries are), as curl's `--compressed` asks for what its build decodes.
    package static let acceptEncoding = (["gzip", "deflate"] + StreamingDecoder.available.map(\.rawValue))
        .joined(separator: ", ")

    /// The coding of `head`'s body, when it is one this decodes.
    static func coding(of head: HTTPResponse) -> String? {
        guard let value = head.headers["Content-Encoding"]?.trimmingWhitespace().lowercased(),
            codings.contains(value)
        else { return nil }
        return value
    }

    /// Decodes `source` (coded with `coding`) into `output`, which must be empty.
    ///
    /// - Parameters:
    ///   - maximumRatio: most times the decoded bytes may outnumber the coded ones read so
    ///     far; `nil` for no ratio.
    ///   - maximumSize: most decoded bytes; `nil` for no limit.
    /// - Throws: ``FerryError/Reason/bodyTooLarge(limit:)`` past a cap,
    ///   ``FerryError/Reason/badServerResponse`` for a body that does not decode.
    static func decode(
        _ source: PartialFile,
        coding: String,
        into output: PartialFile,
        maximumRatio: Int?,
        maximumSize: Int64?
    ) throws {
        if let streamed = StreamingDecoder.Coding(rawValue: coding) {
            return try decode(
                source,
                with: try StreamingDecoder(streamed),
                into: output,
                maximumRatio: maximumRatio,
                maximumSize: maximumSize
            )
        }
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        let limit: NIOHTTPDecompression.DecompressionLimit = maximumRatio.map { .ratio($0) } ?? .none
        var written: Int64 = 0
        func drain() throws {
            while let part = try channel.readInbound(as: HTTPClientResponsePart.self) {
                guard case .body(let buffer) = part else { continue }
                if let maximumSize, written + Int64(buffer.readableBytes) > maximumSize {
                    throw FerryError(
                        .bodyTooLarge(limit: maximumSize),
                        "The \(coding) body inflates past the \(maximumSize)-byte limit on the file."
                    )
                }
                try buffer.withUnsafeReadableBytes { try output.write($0, at: written) }
                written += Int64(buffer.readableBytes)
            }
        }
        do {
            try channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: limit))
            var headers = HTTPHeaders()
            headers.add(name: "Content-Encoding", value: coding)
            try channel.writeInbound(
                HTTPClientResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))
            )
            var offset: Int64 = 0
            var chunk = ByteBuffer()
            while true {
                chunk.clear()
                let count = try chunk.writeWithUnsafeMutableBytes(minimumWritableBytes: 256 * 1024) {
                    try source.read(into: $0, at: offset)
                }
                guard count > 0 else { break }
                offset += Int64(count)
                try channel.writeInbound(HTTPClientResponsePart.body(chunk))
                try drain()
            }
            try channel.writeInbound(HTTPClientResponsePart.end(nil))
            try drain()
        } catch let error as FerryError {
            throw error
        } catch let error as NIOHTTPDecompression.DecompressionError {
            if case .limit = error, let maximumRatio {
                throw FerryError(
                    .bodyTooLarge(limit: Int64(maximumRatio) * source.length),
                    "The \(coding) body inflates more than \(maximumRatio)-fold (a decompression bomb?): refused."
                )
            }
            throw FerryError(.badServerResponse, "The \(coding) body does not decode.", underlying: error)
        } catch {
            throw FerryError(.badServerResponse, "The \(coding) body does not decode.", underlying: error)
        }
    }

    /// `decode` for `br` and `zstd`: the decoded bytes may outnumber the coded ones read so
    /// far at most `maximumRatio` times, and reach at most `maximumSize`, as NIO's limits
    /// hold gzip's; a stream that stops short is refused.
    private static func decode(
        _ source: PartialFile,
        with decoder: StreamingDecoder,
        into output: PartialFile,
        maximumRatio: Int?,
        maximumSize: Int64?
    ) throws {
        let coding = decoder.coding.rawValue
        var input = [UInt8](repeating: 0, count: 256 * 1024)
        var offset: Int64 = 0
        var written: Int64 = 0
        while true {
            let count = try input.withUnsafeMutableBytes { try source.read(into: $0, at: offset) }
            guard count > 0 else { break }
            offset += Int64(count)
            try input.withUnsafeBytes { coded in
                try decoder.decode(UnsafeRawBufferPointer(rebasing: coded[..<count])) { decoded in
                    let total = written + Int64(decoded.count)
                    if let maximumSize, total > maximumSize {
                        throw FerryError(
                            .bodyTooLarge(limit: maximumSize),
                            "The \(coding) body inflates past the \(maximumSize)-byte limit on the file."
                        )
                    }
                    if let maximumRatio, total > Int64(maximumRatio) * offset {
                        throw FerryError(
                            .bodyTooLarge(limit: Int64(maximumRatio) * source.length),
                            "The \(coding) body inflates more than \(maximumRatio)-fold (a decompression bomb?): refused."
                        )
                    }
                    try output.write(decoded, at: written)
                    written = total
                }
            }
        }
        try decoder.finish()
    }
}
