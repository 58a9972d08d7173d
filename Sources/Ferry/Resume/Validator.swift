import Foundation

/// What identifies one version of a resource for a range request: a strong entity tag, or
/// a `Last-Modified` date that is strong in the sense of RFC 9110 §8.8.2.2.
///
/// Only a strong validator may go into `If-Range` (§13.1.5): a weak entity tag never does,
/// and a date only when the response that gave it also carried a `Date` at least one second
/// later (the resource had not changed in the second it was last modified).
public enum Validator: Codable, Sendable, Hashable, CustomStringConvertible {
    /// A strong entity tag, with its quotes: `"abc"`.
    case entityTag(String)
    /// A `Last-Modified` HTTP-date known to be strong.
    case lastModified(String)

    /// The value for `If-Range`.
    public var headerValue: String {
        switch self {
        case .entityTag(let tag): tag
        case .lastModified(let date): date
        }
    }

    public var description: String {
        switch self {
        case .entityTag(let tag): "ETag \(tag)"
        case .lastModified(let date): "Last-Modified \(date)"
        }
    }

    /// The strongest validator `response` offers, or `nil` when it has none that is strong.
    public init?(response: HTTPResponse) {
        if let tag = response.headers["ETag"]?.trimmingWhitespace() {
            if Self.isStrongEntityTag(tag) {
                self = .entityTag(tag)
                return
            }
            // A weak tag is present: the representation is only weakly identified.
            return nil
        }
        if let modified = response.headers["Last-Modified"]?.trimmingWhitespace(),
            let modifiedDate = HTTPDate.parse(modified),
            let sent = response.headers["Date"].flatMap({ HTTPDate.parse($0) }),
            sent.timeIntervalSince(modifiedDate) >= 1
        {
            self = .lastModified(modified)
            return
        }
        return nil
    }

    /// `"…"` without the `W/` prefix (RFC 9110 §8.8.3).
    ///
    /// Read as bytes, as the grammar is written (`DQUOTE *etagc DQUOTE`): no character is
    /// put together, and a tag whose first `etagc` is a combining mark (`obs-text`) still
    /// starts with its quote.
    static func isStrongEntityTag(_ tag: String) -> Bool {
        let quote = UInt8(ascii: "\"")
        let bytes = tag.utf8
        guard bytes.count >= 2, bytes.first == quote, bytes.last == quote else { return false }
        return !bytes.dropFirst().dropLast().contains(quote)
    }

    /// Whether `response` is the same version this validator names (strong comparison).
    public func matches(_ response: HTTPResponse) -> Bool {
        switch self {
        case .entityTag(let tag): response.headers["ETag"]?.trimmingWhitespace() == tag
        case .lastModified(let date): response.headers["Last-Modified"]?.trimmingWhitespace() == date
        }
    }
}

extension Validator {
    private enum CodingKeys: String, CodingKey {
        case entityTag, lastModified
    }

    /// `{"entityTag": "\"…\""}` or `{"lastModified": "<HTTP-date>"}`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let tag = try container.decodeIfPresent(String.self, forKey: .entityTag), Self.isStrongEntityTag(tag) {
            self = .entityTag(tag)
        } else if let date = try container.decodeIfPresent(String.self, forKey: .lastModified),
            HTTPDate.parse(date) != nil
        {
            self = .lastModified(date)
        } else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a strong entity tag or an HTTP-date")
            )
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .entityTag(let tag): try container.encode(tag, forKey: .entityTag)
        case .lastModified(let date): try container.encode(date, forKey: .lastModified)
        }
    }
}
