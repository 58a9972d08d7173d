public import Foundation
import NIOCore

/// A `multipart/form-data` body (RFC 7578) built part by part and produced lazily.
///
/// Its exact `Content-Length`, boundaries and part headers included, is known before the
/// first byte is sent; files are read only as the connection asks, in bounded chunks, so
/// memory does not grow with their size. A file's size is read once, when it is added; a
/// file that changes size before it is sent fails the upload instead of sending a wrong body.
/// Forms without stream parts can be produced again (for a 307 / 308 redirect or a retry).
///
/// Names and file names are escaped as browsers do (WHATWG HTML: `"` as `%22`, CR as `%0D`,
/// LF as `%0A`), so no value can end its header or start a part.
///
/// ```swift
/// var form = MultipartFormData()
/// form.append("ada", name: "user")
/// try form.append(fileURL: photo, name: "avatar")              // image/jpeg from ".jpg"
/// form.append(Data(csv.utf8), name: "report", fileName: "q3.csv")
/// let (reply, _) = try await session.upload(for: URLRequest(url: url, method: .post), multipartFormData: form)
/// ```
public struct MultipartFormData: Sendable {
    /// The boundary between parts: 128 random bits unless chosen.
    public private(set) var boundary: String
    private let boundaryWasChosen: Bool
    private var parts: [Part] = []

    struct Part: Sendable {
        var headers: String
        var content: Content
    }

    enum Content: Sendable {
        case data(Data)
        case file(URL, length: Int64)
        case stream(ByteChunks, length: Int64)

        var length: Int64 {
            switch self {
            case .data(let data): Int64(data.count)
            case .file(_, let length), .stream(_, let length): length
            }
        }
    }

    /// Creates an empty form.
    ///
    /// - Parameter boundary: A boundary to use; by default a random one that no in-memory part
    ///   contains.
    public init(boundary: String? = nil) {
        self.boundary = boundary ?? Self.randomBoundary()
        self.boundaryWasChosen = boundary != nil
    }

    /// `multipart/form-data; boundary=…`, for the request's `Content-Type`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// The exact length of the encoded body.
    public var contentLength: Int64 {
        let delimiter = Int64(boundary.utf8.count) + 4  // "--" boundary "\r\n"
        var total = Int64(0)
        for part in parts {
            total += delimiter + Int64(part.headers.utf8.count) + part.content.length + 2
        }
        return total + Int64(boundary.utf8.count) + 6  // "--" boundary "--\r\n"
    }

    /// Whether the body can be produced again from the start (no stream parts).
    public var isReplayable: Bool {
        !parts.contains { if case .stream = $0.content { true } else { false } }
    }

    // MARK: Adding parts

    /// A text field.
    public mutating func append(_ value: String, name: String) {
        append(.data(Data(value.utf8)), name: name, fileName: nil, mimeType: nil, headers: [:])
    }

    /// A part holding `data`; with a `fileName` it is a file part (`application/octet-stream`
    /// unless `mimeType` or the name's extension says otherwise).
    public mutating func append(
        _ data: Data,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil,
        headers: HeaderFields = [:]
    ) {
        append(.data(data), name: name, fileName: fileName, mimeType: mimeType, headers: headers)
    }

    /// A file part streamed from disk. The file name defaults to the file's, the MIME type to
    /// the one its extension names; the size is read now.
    public mutating func append(
        fileURL: URL,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil,
        headers: HeaderFields = [:]
    ) throws(FerryError) {
        let body: RequestBody
        do {
            body = try RequestBody.file(at: fileURL)
        } catch let error as FerryError {
            throw error
        } catch {
            throw FerryError(.uploadBodyFailed, "Cannot read '\(fileURL.path)'.", underlying: error)
        }
        let fileName = fileName ?? fileURL.lastPathComponent
        append(
            .file(fileURL, length: body.length ?? 0),
            name: name,
            fileName: fileName,
            mimeType: mimeType ?? MIMEType.forExtension(of: fileName),
            headers: headers
        )
    }

    /// A part read once from an async sequence of exactly `length` bytes. A form with a
    /// stream part cannot be sent again (a 307 redirect of it fails the task).
    public mutating func append<Stream: AsyncSequence & Sendable>(
        stream: Stream,
        length: Int64,
        name: String,
        fileName: String? = nil,
        mimeType: String? = nil,
        headers: HeaderFields = [:]
    ) where Stream.Element: DataProtocol {
        append(
            .stream(.oneShot(stream), length: length),
            name: name,
            fileName: fileName,
            mimeType: mimeType,
            headers: headers
        )
    }

    private mutating func append(
        _ content: Content,
        name: String,
        fileName: String?,
        mimeType: String?,
        headers: HeaderFields
    ) {
        var head = "Content-Disposition: form-data; name=\"\(Self.escape(name))\""
        if let fileName { head += "; filename=\"\(Self.escape(fileName))\"" }
        head += "\r\n"
        if let type = mimeType ?? (fileName != nil ? MIMEType.forExtension(of: fileName ?? "") : nil) {
            head += "Content-Type: \(Self.headerValue(type))\r\n"
        }
        for field in headers where !["content-disposition", "content-type"].contains(field.name.lowercased()) {
            head += "\(Self.headerValue(field.name)): \(Self.headerValue(field.value))\r\n"
        }
        head += "\r\n"
        parts.append(Part(headers: head, content: content))
        ensureBoundaryIsUnique()
    }

    // MARK: Encoding

    /// The body, produced lazily in bounded chunks.
    var requestBody: RequestBody { .multipart(self) }

    /// The chunks of the encoded body, from the start.
    func chunks() -> ByteChunks {
        let parts = self.parts
        let boundary = self.boundary
        return ByteChunks {
            var index = 0
            var stage = 0  // 0: delimiter + headers, 1: content, 2: CRLF after content
            var content: ByteChunks.Iterator?
            var remaining: Int64 = 0
            var closed = false
            return ByteChunks.Iterator {
                while true {
                    guard index < parts.count else {
                        if closed { return nil }
                        closed = true
                        return ByteBuffer(string: "--\(boundary)--\r\n")
                    }
                    let part = parts[index]
                    switch stage {
                    case 0:
                        stage = 1
                        remaining = part.content.length
                        content = Self.contentChunks(part.content).makeAsyncIterator()
                        return ByteBuffer(string: "--\(boundary)\r\n" + part.headers)
                    case 1:
                        if var iterator = content, let chunk = try await iterator.next() {
                            content = iterator
                            remaining -= Int64(chunk.readableBytes)
                            guard remaining >= 0 else {
                                throw FerryError(
                                    .uploadBodyFailed,
                                    "A stream part produced more bytes than its declared length."
                                )
                            }
                            return chunk
                        }
                        guard remaining == 0 else {
                            throw FerryError(
                                .uploadBodyFailed,
                                "A part ended \(remaining) bytes short of its declared length."
                            )
                        }
                        stage = 2
                    default:
                        stage = 0
                        index += 1
                        return ByteBuffer(string: "\r\n")
                    }
                }
            }
        }
    }

    private static func contentChunks(_ content: Content) -> ByteChunks {
        switch content {
        case .data(let data): RequestBody.data(data).chunks()
        case .file(let url, let length): RequestBody.file(url, length: length).chunks()
        case .stream(let chunks, _): chunks
        }
    }

    /// Writes the encoded form to `fileURL` (for uploads from a file, such as background
    /// sessions), streaming it; the file appears complete or not at all.
    public func encode(to fileURL: URL) async throws(FerryError) {
        let directory = fileURL.deletingLastPathComponent()
        do {
            let partial = try PartialFile(in: directory)
            do {
                var iterator = chunks().makeAsyncIterator()
                var offset: Int64 = 0
                while let chunk = try await iterator.next() {
                    try chunk.withUnsafeReadableBytes { try partial.write($0, at: offset) }
                    offset += Int64(chunk.readableBytes)
                }
                try partial.finish()
                try FileSystem.moveFile(from: partial.url, to: fileURL, createDirectories: false, replace: true)
            } catch {
                partial.discard()
                throw error
            }
        } catch let error as FerryError {
            throw error
        } catch {
            throw FerryError(.fileSystem, "Cannot write the form to '\(fileURL.path)'.", underlying: error)
        }
    }

    // MARK: Escaping and boundaries

    /// WHATWG form-data escaping of a name or file name: `"`, CR and LF percent-encoded.
    static func escape(_ value: String) -> String {
        var result = ""
        for character in value.unicodeScalars {
            switch character {
            case "\"": result += "%22"
            case "\r": result += "%0D"
            case "\n": result += "%0A"
            default: result.unicodeScalars.append(character)
            }
        }
        return result
    }

    /// A header name or value with CR and LF removed, so it cannot start another header.
    static func headerValue(_ value: String) -> String {
        String(value.unicodeScalars.filter { $0 != "\r" && $0 != "\n" }.map(Character.init))
    }

    static func randomBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let bits = (0..<2).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }
        return "ferry-" + bits.joined()
    }

    /// A random boundary must not occur in any in-memory part; pick another if it does
    /// (streamed parts are not inspected: with 128 random bits a collision is negligible).
    private mutating func ensureBoundaryIsUnique() {
        guard !boundaryWasChosen else { return }
        while parts.contains(where: { part in
            if case .data(let data) = part.content { return data.range(of: Data(boundary.utf8)) != nil }
            return part.headers.contains(boundary)
        }) {
            boundary = Self.randomBoundary()
        }
    }
}

/// MIME types for common file extensions (what browsers and curl send).
enum MIMEType {
    static let table: [String: String] = [
        "txt": "text/plain", "html": "text/html", "htm": "text/html", "css": "text/css", "csv": "text/csv",
        "md": "text/markdown", "xml": "application/xml", "js": "text/javascript", "json": "application/json",
        "pdf": "application/pdf", "zip": "application/zip", "gz": "application/gzip", "tar": "application/x-tar",
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "ico": "image/vnd.microsoft.icon", "mp3": "audio/mpeg", "wav": "audio/wav",
        "ogg": "audio/ogg", "mp4": "video/mp4", "webm": "video/webm", "wasm": "application/wasm",
    ]

    static func forExtension(of fileName: String) -> String {
        guard let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex else {
            return "application/octet-stream"
        }
        return table[fileName[fileName.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }
}
