import Crypto
import Foundation
import NIOCore

/// A fast streaming `multipart/form-data` reader for large bodies (`/sink?parser=scan`):
/// finds delimiters with `Data.range(of:)` and keeps only a delimiter's length of carry-over
/// between chunks, hashing each part's content. multipart-kit (``FormReader``) reads the
/// encoding details; this reads 1 GiB in seconds, even in debug builds.
final class FormScanner {
    private enum State {
        case preamble
        case headers
        case body
        case epilogue
    }

    private let delimiter: Data  // CRLF "--" boundary
    private var pending = Data()
    private var state = State.preamble
    private var parts: [FormPart] = []
    private var current = FormPart(headers: [], bytes: 0, sha256: "", prefix: Data())
    private var hasher = SHA256()
    private(set) var error: String?

    init(boundary: String) {
        delimiter = Data("\r\n--\(boundary)".utf8)
        // The first delimiter has no CRLF before it: pretend there was one.
        pending = Data("\r\n".utf8)
    }

    func feed(_ buffer: ByteBuffer) {
        guard error == nil else { return }
        pending.append(contentsOf: buffer.readableBytesView)
        process()
    }

    func finish() -> [FormPart] {
        if state != .epilogue, error == nil { error = "the body ended before the closing delimiter" }
        return parts
    }

    private func process() {
        while true {
            switch state {
            case .preamble:
                guard let range = pending.range(of: delimiter) else {
                    pending = Data(pending.suffix(delimiter.count))
                    return
                }
                pending = Data(pending[range.upperBound...])
                state = .headers
            case .headers:
                // After a delimiter: "--" ends the body, CRLF starts a part's headers.
                guard pending.count >= 2 else { return }
                if pending.starts(with: Data("--".utf8)) {
                    state = .epilogue
                    return
                }
                guard let end = pending.range(of: Data("\r\n\r\n".utf8)) else { return }
                let block = String(decoding: pending[pending.startIndex..<end.lowerBound], as: UTF8.self)
                current = FormPart(headers: [], bytes: 0, sha256: "", prefix: Data())
                for line in block.split(separator: "\r\n") {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    current.headers.append([
                        String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces),
                    ])
                }
                hasher = SHA256()
                pending = Data(pending[end.upperBound...])
                state = .body
            case .body:
                if let range = pending.range(of: delimiter) {
                    consume(pending[pending.startIndex..<range.lowerBound])
                    current.sha256 = hasher.finalize().hexString
                    parts.append(current)
                    pending = Data(pending[range.upperBound...])
                    state = .headers
                } else {
                    // Keep what could be the start of a delimiter; the rest is content.
                    let keep = min(pending.count, delimiter.count - 1)
                    consume(pending[pending.startIndex..<(pending.endIndex - keep)])
                    pending = Data(pending.suffix(keep))
                    return
                }
            case .epilogue:
                return
            }
        }
    }

    private func consume(_ bytes: Data) {
        guard !bytes.isEmpty else { return }
        hasher.update(data: bytes)
        current.bytes += Int64(bytes.count)
        if current.prefix.count < 65536 { current.prefix.append(bytes.prefix(65536 - current.prefix.count)) }
    }
}
