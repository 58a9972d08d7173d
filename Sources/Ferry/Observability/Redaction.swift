import Foundation

/// What a log line or a listing may show of a URL: its password and the values of the
/// query parameters that sign or authorize a request replaced by `REDACTED`.
///
/// Spans drop the whole query (OpenTelemetry's rule for `url.full`); a log line and
/// `ferry ls` keep what identifies the resource — scheme, user, host, path, the other
/// parameters — so that an operator can still tell tasks apart:
///
/// ```swift
/// Redaction.redactingURLs(in: "GET https://ann:secret@cdn/f?X-Amz-Signature=9f&part=2")
/// // "GET https://ann:REDACTED@cdn/f?X-Amz-Signature=REDACTED&part=2"
/// ```
///
/// The text is scanned for `scheme://`, so a URL inside an error's description or a
/// metadata value is found as well as one given alone.
package enum Redaction {
    /// The query parameters whose values are credentials, compared without case.
    package static let secretParameters: Set<String> = [
        "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-goog-signature",
        "x-goog-credential", "sig", "signature", "token", "access_token", "api_key", "apikey",
        "password", "secret",
    ]

    /// `text` with every URL in it redacted; `text` itself when it holds none.
    package static func redactingURLs(in text: String) -> String {
        guard text.utf8.count >= 3, text.contains("://") else { return text }
        let bytes = Array(text.utf8)
        var index = 0
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        while index < bytes.count {
            guard let marker = find(separator, in: bytes, from: index) else {
                output += bytes[index...]
                break
            }
            // The scheme runs back from "://" over letters, digits, "+", "-", ".".
            var start = marker
            while start > index, isSchemeByte(bytes[start - 1]) { start -= 1 }
            var end = marker + separator.count
            while end < bytes.count, !endsURL(bytes[end]) { end += 1 }
            // Punctuation that closes the sentence around a URL is not part of it.
            while end > marker + separator.count, closesSentence(bytes[end - 1]) { end -= 1 }
            output += bytes[index..<start]
            output += start == marker ? Array(bytes[marker..<end]) : redacted(Array(bytes[start..<end]))
            index = end
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static let separator = Array("://".utf8)
    private static let marker = Array("REDACTED".utf8)

    /// One URL's bytes, `scheme://[user[:password]@]host…[?query][#fragment]`, redacted.
    private static func redacted(_ url: [UInt8]) -> [UInt8] {
        guard let schemeEnd = find(separator, in: url, from: 0) else { return url }
        let authorityStart = schemeEnd + separator.count
        var authorityEnd = authorityStart
        while authorityEnd < url.count, !"/?#".utf8.contains(url[authorityEnd]) { authorityEnd += 1 }
        var result = Array(url[..<authorityStart])
        let authority = url[authorityStart..<authorityEnd]
        if let at = authority.lastIndex(of: UInt8(ascii: "@")),
            let colon = authority[..<at].firstIndex(of: UInt8(ascii: ":"))
        {
            result += url[authorityStart...colon]
            result += marker
            result += url[at..<authorityEnd]
        } else {
            result += authority
        }
        appendRedactingQuery(url[authorityEnd...], to: &result)
        return result
    }

    /// A request target (`/path?query`, as a request line has it) with the values of its
    /// signed parameters replaced by `REDACTED`.
    package static func redactingQuery(of target: String) -> String {
        guard target.utf8.contains(UInt8(ascii: "?")) else { return target }
        var result: [UInt8] = []
        appendRedactingQuery(Array(target.utf8)[...], to: &result)
        return String(decoding: result, as: UTF8.self)
    }

    /// Appends `rest` (a path, its query, its fragment) with the values of the query's
    /// secret parameters redacted.
    private static func appendRedactingQuery(_ rest: ArraySlice<UInt8>, to result: inout [UInt8]) {
        var rest = rest
        guard let question = rest.firstIndex(of: UInt8(ascii: "?")) else {
            result += rest
            return
        }
        result += rest[...question]
        rest = rest[(question + 1)...]
        let queryEnd = rest.firstIndex(of: UInt8(ascii: "#")) ?? rest.endIndex
        let pairs = rest[..<queryEnd].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false)
        for (number, pair) in pairs.enumerated() {
            if number > 0 { result.append(UInt8(ascii: "&")) }
            if let equals = pair.firstIndex(of: UInt8(ascii: "=")), isSecret(pair[..<equals]) {
                result += pair[...equals]
                result += marker
            } else {
                result += pair
            }
        }
        result += rest[queryEnd...]
    }

    /// Whether a parameter's (percent-encoded) name is one of ``secretParameters``.
    private static func isSecret(_ name: ArraySlice<UInt8>) -> Bool {
        let text = String(decoding: name, as: UTF8.self)
        let decoded = text.contains("%") ? (text.removingPercentEncoding ?? text) : text
        return secretParameters.contains(decoded.lowercased())
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= needle.count, start <= bytes.count - needle.count else { return nil }
        for index in start...(bytes.count - needle.count) where bytes[index] == needle[0] {
            if bytes[index..<(index + needle.count)].elementsEqual(needle) { return index }
        }
        return nil
    }

    private static func isSchemeByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."):
            true
        default: false
        }
    }

    /// Bytes no URL holds unencoded: white space, controls, quotes, angle brackets.
    private static func endsURL(_ byte: UInt8) -> Bool {
        byte <= 0x20 || byte == 0x7F || "\"'<>`".utf8.contains(byte)
    }

    private static func closesSentence(_ byte: UInt8) -> Bool { ").,;:]".utf8.contains(byte) }
}
