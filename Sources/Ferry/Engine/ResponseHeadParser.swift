import Foundation
import NIOCore

/// Reads an HTTP/1.1 response head (status line and header fields, RFC 9112 §4–5) from the
/// bytes of a connection Ferry speaks on itself (an `Upgrade` or `CONNECT` request), and the
/// framing of the body that follows: a value with no I/O.
///
/// Bytes are appended as they arrive; ``head()`` returns the head once its empty line is in,
/// and leaves what follows it (the start of the body, or of the upgraded protocol) in
/// ``remainder``. Obsolete line folding, a missing status code, or a head larger than
/// ``maximumSize`` are errors, never guesses.
struct ResponseHeadParser: Sendable {
    struct Head: Sendable, Equatable {
        var version: String
        var statusCode: Int
        var reasonPhrase: String
        var fields: [(name: String, value: String)]

        static func == (lhs: Head, rhs: Head) -> Bool {
            lhs.version == rhs.version && lhs.statusCode == rhs.statusCode && lhs.reasonPhrase == rhs.reasonPhrase
                && lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
        }

        func value(of name: String) -> String? {
            fields.first { $0.name.lowercased() == name.lowercased() }?.value
        }
    }

    /// How the body after a head is delimited (RFC 9112 §6.3).
    enum Framing: Sendable, Equatable {
        case none
        case length(Int64)
        case chunked
        case untilClose
    }

    let maximumSize: Int
    private(set) var remainder = ByteBuffer()

    init(maximumSize: Int = 64 * 1024) { self.maximumSize = maximumSize }

    mutating func append(_ bytes: ByteBuffer) {
        var bytes = bytes
        remainder.writeBuffer(&bytes)
    }

    /// The head, once complete; `nil` while more bytes are needed.
    mutating func head() throws(FerryError) -> Head? {
        let view = remainder.readableBytesView
        guard let end = Self.endOfHead(in: view) else {
            if view.count > maximumSize { throw Self.error("The response head is larger than \(maximumSize) bytes.") }
            return nil
        }
        let text = String(decoding: view[view.startIndex..<end], as: UTF8.self)
        remainder.moveReaderIndex(forwardBy: end - view.startIndex + 4)
        var lines = text.components(separatedBy: "\r\n")
        let status = lines.removeFirst().split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard status.count >= 2, status[0].hasPrefix("HTTP/1."), let code = Int(status[1]), (100...999).contains(code)
        else { throw Self.error("The response does not start with an HTTP/1.x status line.") }
        var fields: [(name: String, value: String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), line.first != " ", line.first != "\t" else {
                throw Self.error("A response header field is malformed: '\(line.prefix(80))'.")
            }
            let name = String(line[..<colon])
            guard !name.isEmpty, !name.contains(" ") else {
                throw Self.error("A response header field has no valid name: '\(line.prefix(80))'.")
            }
            fields.append((name, line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return Head(
            version: String(status[0]),
            statusCode: code,
            reasonPhrase: status.count > 2 ? String(status[2]) : "",
            fields: fields
        )
    }

    /// How `head`'s body is framed, for a response to `method`.
    static func framing(of head: Head, method: String) throws(FerryError) -> Framing {
        if method == "HEAD" || (100..<200).contains(head.statusCode) || head.statusCode == 204
            || head.statusCode == 304
        {
            return .none
        }
        if method == "CONNECT" && (200..<300).contains(head.statusCode) { return .none }
        if let coding = head.value(of: "Transfer-Encoding") {
            guard coding.lowercased().split(separator: ",").last?.trimmingCharacters(in: .whitespaces) == "chunked"
            else { return .untilClose }
            return .chunked
        }
        if let length = head.value(of: "Content-Length") {
            guard let value = Int64(length), value >= 0 else {
                throw error("The response's Content-Length '\(length)' is not a length.")
            }
            return .length(value)
        }
        return .untilClose
    }

    private static func endOfHead(in view: ByteBufferView) -> Int? {
        guard view.count >= 4 else { return nil }
        var index = view.startIndex
        while index + 3 < view.endIndex {
            if view[index] == 13, view[index + 1] == 10, view[index + 2] == 13, view[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    private static func error(_ message: String) -> FerryError { FerryError(.badServerResponse, message) }
}
