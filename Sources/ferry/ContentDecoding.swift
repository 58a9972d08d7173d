import Ferry
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPCompression

/// `ferry get --compressed`: the body is stored as the server coded it (that is what the
/// download received), then decoded, streaming, with NIO's HTTP decompressor.
enum ContentDecoding {
    /// What `--compressed` asks for and can decode.
    static let acceptEncoding = "gzip, deflate"
    private static let codings: Set<String> = ["gzip", "x-gzip", "deflate"]

    /// The coding `response` carries, when this tool decodes it.
    static func coding(of response: HTTPResponse?) -> String? {
        guard let value = response?.headers["Content-Encoding"]?.trimmingCharacters(in: .whitespaces).lowercased(),
            codings.contains(value)
        else { return nil }
        return value
    }

    /// Feeds the decoded bytes of `source` (coded with `coding`) to `write`.
    static func decode(_ source: URL, coding: String, write: (ByteBuffer) throws -> Void) throws {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        try channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: .none))
        func drain() throws {
            while let part = try channel.readInbound(as: HTTPClientResponsePart.self) {
                if case .body(let buffer) = part { try write(buffer) }
            }
        }
        var headers = HTTPHeaders()
        headers.add(name: "Content-Encoding", value: coding)
        try channel.writeInbound(
            HTTPClientResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))
        )
        let handle = try FileHandle(forReadingFrom: source)
        defer { try? handle.close() }
        while let chunk = try handle.read(upToCount: 256 * 1024), !chunk.isEmpty {
            try channel.writeInbound(HTTPClientResponsePart.body(ByteBuffer(bytes: chunk)))
            try drain()
        }
        try channel.writeInbound(HTTPClientResponsePart.end(nil))
        try drain()
    }

    /// Replaces `file` with its decoded bytes: written to a hidden file beside it, flushed,
    /// then renamed over it, so `file` is always whole (coded or decoded).
    static func decodeInPlace(_ file: URL, coding: String) throws(FerryError) {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).ferry-decoding-\(getpid())")
        do {
            _ = FileManager.default.createFile(
                atPath: temporary.path,
                contents: nil,
                attributes: [.posixPermissions: 0o600]
            )
            let output = try FileHandle(forWritingTo: temporary)
            do {
                try decode(file, coding: coding) { buffer in
                    try output.write(contentsOf: Data(buffer.readableBytesView))
                }
                try output.synchronize()
                try output.close()
            } catch {
                try? output.close()
                throw error
            }
            guard rename(temporary.path, file.path) == 0 else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
            }
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw FerryError(
                .badServerResponse,
                "The \(coding) body does not decode; '\(file.path)' keeps the bytes as received.",
                underlying: error
            )
        }
    }
}
