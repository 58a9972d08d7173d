/// An ordered list of HTTP header fields with case-insensitive lookup.
///
/// Order and repeated names are kept as the server sent them (RFC 9110 §5.3); lookup by
/// name ignores ASCII case.
///
/// ```swift
/// let type = response.headers["content-type"]      // first value
/// let cookies = response.headers.values(for: "Set-Cookie")
/// ```
public struct HeaderFields: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    /// The fields, in order.
    public private(set) var fields: [(name: String, value: String)]

    /// Creates a header list from name/value pairs, keeping their order.
    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.fields = elements.map { (name: $0.0, value: $0.1) }
    }

    /// The first value for `name`, or `nil`; setting replaces every field of that name.
    public subscript(name: String) -> String? {
        get { fields.first { Self.sameName($0.name, name) }?.value }
        set {
            let position = fields.firstIndex { Self.sameName($0.name, name) } ?? fields.endIndex
            fields.removeAll { Self.sameName($0.name, name) }
            if let newValue {
                fields.insert((name, newValue), at: Swift.min(position, fields.endIndex))
            }
        }
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// Field names compare case-insensitively (RFC 9110 §5.1); they are ASCII tokens, so
    /// this compares bytes without allocating lowercased copies. Names of different lengths
    /// (most of a head's, for any one name asked) differ at once: a native string knows its
    /// UTF-8 count.
    static func sameName(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x != y && (x | 0x20) != (y | 0x20) { return false }
                if x != y && !((x | 0x20) >= 0x61 && (x | 0x20) <= 0x7A) { return false }
            default: return false
            }
        }
    }

    /// Whether a field named `name` exists.
    public func contains(_ name: String) -> Bool { self[name] != nil }

    /// Appends a field, keeping existing ones of the same name.
    public mutating func add(name: String, value: String) { fields.append((name, value)) }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public static func == (lhs: HeaderFields, rhs: HeaderFields) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy {
                $0.name.lowercased() == $1.name.lowercased() && $0.value == $1.value
            }
    }
}

extension HeaderFields {
    /// The request fields that carry credentials (lower-case): never sent to another origin
    /// after a redirect, never stored in resume data, never shown in a log or a listing.
    static let credentialNames: Set<String> = ["authorization", "proxy-authorization", "cookie"]
}
