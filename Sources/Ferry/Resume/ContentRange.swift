/// A `Content-Range` header value (RFC 9110 §14.4): `bytes first-last/complete`, with
/// `complete` possibly `*`, or the unsatisfied form `bytes */complete`.
///
/// Parsing is strict: anything that does not parse, or whose numbers do not fit together
/// (`first > last`, `last >= complete`), is `nil`, and a response carrying it is an error,
/// never data.
public enum ContentRange: Sendable, Equatable {
    /// Bytes `first...last` of a representation of `complete` bytes (`nil`: unknown).
    case satisfied(first: Int64, last: Int64, complete: Int64?)
    /// The range was not satisfiable; the representation has `complete` bytes.
    case unsatisfied(complete: Int64)

    /// Parses a `Content-Range` value (`bytes 0-99/1000`, `bytes */1000`); `nil` when it is not one.
    public init?(_ value: String) {
        let trimmed = value.trimmingWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = String(trimmed.dropFirst("bytes ".count)).trimmingWhitespace()
        let parts = spec.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let rangePart = parts[0]
        let completePart = parts[1]
        if rangePart == "*" {
            guard let complete = Self.number(completePart) else { return nil }
            self = .unsatisfied(complete: complete)
            return
        }
        let bounds = rangePart.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = Self.number(bounds[0]), let last = Self.number(bounds[1]), first <= last
        else { return nil }
        var complete: Int64?
        if completePart != "*" {
            guard let value = Self.number(completePart), last < value else { return nil }
            complete = value
        }
        self = .satisfied(first: first, last: last, complete: complete)
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(text)
    }
}
