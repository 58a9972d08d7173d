public import Foundation

/// The head of an HTTP response: status, header fields and the URL that answered.
///
/// Ferry's counterpart of `HTTPURLResponse`, as a value type. ``url`` is the final URL after
/// redirects.
public struct HTTPResponse: Sendable, Equatable {
    /// The URL that produced this response (after redirects).
    public var url: URL
    /// The status code, for example 200 or 404.
    public var statusCode: Int
    /// The reason phrase the server sent, for example "Not Found".
    public var reasonPhrase: String
    /// The header fields, in the server's order.
    public var headers: HeaderFields
    /// The HTTP version, for example "HTTP/1.1".
    public var httpVersion: String

    /// Creates a response head.
    public init(
        url: URL,
        statusCode: Int,
        reasonPhrase: String = "",
        headers: HeaderFields = [:],
        httpVersion: String = "HTTP/1.1"
    ) {
        self.url = url
        self.statusCode = statusCode
        self.reasonPhrase = reasonPhrase
        self.headers = headers
        self.httpVersion = httpVersion
    }

    /// The body length the server announced in `Content-Length`, or `nil` when unknown.
    public var expectedContentLength: Int64? {
        // Read in place (every response asks, often twice): blanks around the digits only.
        guard let value = headers["Content-Length"] else { return nil }
        let blank: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        let trimmed = value.utf8.drop(while: blank).reversed().drop(while: blank)
        guard !trimmed.isEmpty else { return nil }
        var length: Int64 = 0
        for byte in trimmed.reversed() {
            guard (0x30...0x39).contains(byte) else { return nil }
            let (times, overflowed) = length.multipliedReportingOverflow(by: 10)
            let (sum, overflowedAgain) = times.addingReportingOverflow(Int64(byte - 0x30))
            guard !overflowed, !overflowedAgain else { return nil }
            length = sum
        }
        return length
    }

    /// The media type without parameters, lower-cased (`text/html`), if the server sent one.
    public var mimeType: String? {
        guard let type = headers["Content-Type"] else { return nil }
        let essence = type.split(separator: ";", maxSplits: 1).first.map(String.init) ?? type
        let trimmed = essence.trimmingWhitespace().lowercased()
        return trimmed.isEmpty ? nil : trimmed
    }

    /// The `charset` parameter of `Content-Type`, lower-cased, if present.
    public var textEncodingName: String? {
        guard let type = headers["Content-Type"] else { return nil }
        for parameter in type.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2,
                pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "charset"
            else { continue }
            var value = pair[1].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                value = String(value.dropFirst().dropLast())
            }
            return value.lowercased()
        }
        return nil
    }

    /// A file name safe to create in a directory of the caller's choosing.
    ///
    /// Taken from `Content-Disposition` when present, else from the URL's last path
    /// component, then reduced by ``SafeFilename/sanitize(_:fallback:)``: never a path, never
    /// `..`, never a control character, never longer than 255 bytes.
    public var suggestedFilename: String {
        if let disposition = headers["Content-Disposition"],
            let name = ContentDisposition(parsing: disposition)?.filename
        {
            let safe = SafeFilename.sanitize(name, fallback: "")
            if !safe.isEmpty { return safe }
        }
        // The path's last non-empty component, found in place.
        var last = Substring(url.path)
        while last.last == "/" { last.removeLast() }
        if let slash = last.lastIndex(of: "/") { last = last[last.index(after: slash)...] }
        let name = String(last)
        let decoded = name.contains("%") ? (name.removingPercentEncoding ?? name) : name
        return SafeFilename.sanitize(decoded, fallback: "download")
    }

    /// Whether the status is in 200...299.
    public var isSuccess: Bool { (200..<300).contains(statusCode) }
}
