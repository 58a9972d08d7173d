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
        get { fields.first { $0.name.lowercased() == name.lowercased() }?.value }
        set {
            let lower = name.lowercased()
            let position = fields.firstIndex { $0.name.lowercased() == lower } ?? fields.endIndex
            fields.removeAll { $0.name.lowercased() == lower }
            if let newValue {
                fields.insert((name, newValue), at: Swift.min(position, fields.endIndex))
            }
        }
    }

    /// Every value for `name`, in order.
    public func values(for name: String) -> [String] {
        let lower = name.lowercased()
        return fields.filter { $0.name.lowercased() == lower }.map(\.value)
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
