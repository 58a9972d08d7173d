import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// One request as the test server read it: head, route, query, and what the body held.
struct TestRequest: Sendable {
    var head: HTTPRequestHead
    var path: String
    var query: [String: String]
    /// Body bytes read.
    var bodyLength: Int64
    /// SHA-256 of the body, lower-case hex.
    var bodySHA256: String
    /// The first bytes of the body (at most ``RequestReader/keptBodyLimit``).
    var body: Data
    /// For a `multipart/form-data` body: its parts as an independent parser read them.
    var parts: [FormPart]?
    /// Why the multipart body did not parse, if it did not.
    var multipartError: String?

    var method: HTTPMethod { head.method }
    var headers: HTTPHeaders { head.headers }

    func queryInt(_ name: String) -> Int64? { query[name].flatMap { Int64($0) } }
    func flag(_ name: String) -> Bool { query[name].map { $0 != "0" && $0 != "false" } ?? false }
}

enum RequestReader {
    static let keptBodyLimit = 1 << 20

    /// Reads the rest of a request whose head has arrived: every body byte, hashed as it
    /// goes; only the first MiB is kept.
    static func read(
        head: HTTPRequestHead,
        from iterator: inout NIOAsyncChannelInboundStream<HTTPServerRequestPart>.AsyncIterator
    ) async throws -> TestRequest {
        var hasher = SHA256()
        var length: Int64 = 0
        var kept = Data()
        let form = FormReader(
            contentType: head.headers.first(name: "content-type"),
            fast: head.uri.contains("parser=scan")
        )
        reading: while let part = try await iterator.next() {
            switch part {
            case .head:
                break reading
            case .body(let buffer):
                buffer.withUnsafeReadableBytes { bytes in
                    hasher.update(bufferPointer: bytes)
                    if kept.count < keptBodyLimit {
                        kept.append(contentsOf: bytes.prefix(keptBodyLimit - kept.count))
                    }
                }
                length += Int64(buffer.readableBytes)
                form?.feed(buffer)
            case .end:
                break reading
            }
        }
        let (path, query) = parse(uri: head.uri)
        return TestRequest(
            head: head,
            path: path,
            query: query,
            bodyLength: length,
            bodySHA256: hasher.finalize().hexString,
            body: kept,
            parts: form?.finish(),
            multipartError: form?.error
        )
    }

    static func parse(uri: String) -> (String, [String: String]) {
        guard let components = URLComponents(string: uri) else { return (uri, [:]) }
        var query: [String: String] = [:]
        for item in components.queryItems ?? [] { query[item.name] = item.value ?? "" }
        return (components.percentEncodedPath, query)
    }
}
