import Crypto
import Foundation
import MultipartKit
import NIOCore

/// One part of a `multipart/form-data` body as the sink read it.
struct FormPart: Sendable {
    /// Header fields in the order they came.
    var headers: [[String]]
    var bytes: Int64
    var sha256: String
    /// The first 64 KiB of the content.
    var prefix: Data

    var json: [String: Any] {
        [
            "headers": headers, "bytes": bytes, "sha256": sha256,
            "text": String(decoding: prefix, as: UTF8.self), "base64": prefix.base64EncodedString(),
        ]
    }
}

/// Parses a multipart body as it streams in, with vapor/multipart-kit (independent of
/// Ferry's encoder), hashing each part instead of keeping it.
final class FormReader {
    private let parser: MultipartParser
    private let scanner: FormScanner?
    private var parts: [FormPart] = []
    private var current = FormPart(headers: [], bytes: 0, sha256: "", prefix: Data())
    private var hasher = SHA256()
    private(set) var error: String?
    private var completed = false

    /// - Parameter fast: Use ``FormScanner`` instead of multipart-kit (for very large bodies).
    init?(contentType: String?, fast: Bool = false) {
        guard let contentType, contentType.lowercased().hasPrefix("multipart/form-data"),
            let range = contentType.range(of: "boundary=")
        else { return nil }
        var boundary = String(contentType[range.upperBound...])
        if let semicolon = boundary.firstIndex(of: ";") { boundary = String(boundary[..<semicolon]) }
        boundary = boundary.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        parser = MultipartParser(boundary: boundary)
        scanner = fast ? FormScanner(boundary: boundary) : nil
        parser.onHeader = { [unowned self] name, value in current.headers.append([name, value]) }
        parser.onBody = { [unowned self] buffer in
            buffer.withUnsafeReadableBytes { bytes in
                hasher.update(bufferPointer: bytes)
                if current.prefix.count < 65536 {
                    current.prefix.append(contentsOf: bytes.prefix(65536 - current.prefix.count))
                }
            }
            current.bytes += Int64(buffer.readableBytes)
            buffer.moveReaderIndex(to: buffer.writerIndex)
        }
        parser.onPartComplete = { [unowned self] in
            current.sha256 = hasher.finalize().hexString
            parts.append(current)
            current = FormPart(headers: [], bytes: 0, sha256: "", prefix: Data())
            hasher = SHA256()
        }
    }

    func feed(_ buffer: ByteBuffer) {
        if let scanner {
            scanner.feed(buffer)
            return
        }
        guard error == nil else { return }
        do {
            try parser.execute(buffer)
        } catch {
            self.error = String(describing: error)
        }
    }

    func finish() -> [FormPart] {
        guard let scanner else { return parts }
        let scanned = scanner.finish()
        error = scanner.error
        return scanned
    }
}
