import Foundation

/// Flattens an `Encodable` value into ordered name/value pairs for form and query encoding.
///
/// Keyed values become `name=value`; arrays repeat the name (`tag=a&tag=b`), or with
/// ``URLEncodedFormParameterEncoder/ArrayEncoding/brackets`` add empty brackets to it
/// (`tag[]=a&tag[]=b`); nested keyed values use brackets (`user[name]=ada`). Booleans are
/// `true` / `false`, `nil` is left out. Pairs are sorted by name so a dictionary gives stable
/// output.
enum FormPairsEncoder {
    static func pairs<Value: Encodable>(
        from value: Value,
        arrays: URLEncodedFormParameterEncoder.ArrayEncoding = .repeatedName
    ) throws -> [(String, String)] {
        let storage = PairStorage(arrays: arrays)
        let encoder = PairEncoder(storage: storage, path: [])
        do {
            try value.encode(to: encoder)
        } catch {
            throw FerryError(.invalidRequest, "Could not form-encode the parameters.", underlying: error)
        }
        guard storage.topLevelIsKeyed else {
            throw FerryError(
                .invalidRequest,
                "Form and query parameters must be a keyed value such as a struct or [String: String]."
            )
        }
        return storage.pairs.enumerated()
            .sorted { ($0.element.0, $0.offset) < ($1.element.0, $1.offset) }
            .map(\.element)
    }
}

private final class PairStorage {
    let arrays: URLEncodedFormParameterEncoder.ArrayEncoding
    var pairs: [(String, String)] = []
    var topLevelIsKeyed = false

    init(arrays: URLEncodedFormParameterEncoder.ArrayEncoding) { self.arrays = arrays }
}

private struct PairEncoder: Encoder {
    let storage: PairStorage
    let path: [String]
    var codingPath: [any CodingKey] { path.map { PathKey(stringValue: $0) } }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    var name: String {
        guard let first = path.first else { return "" }
        let brackets = storage.arrays == .brackets
        // An empty component is an array's element.
        return first + path.dropFirst().compactMap { $0.isEmpty ? (brackets ? "[]" : nil) : "[\($0)]" }.joined()
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if path.isEmpty { storage.topLevelIsKeyed = true }
        return KeyedEncodingContainer(KeyedPairContainer<Key>(encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer { UnkeyedPairContainer(encoder: self) }
    func singleValueContainer() -> any SingleValueEncodingContainer { SinglePairContainer(encoder: self) }

    func appending(_ component: String) -> PairEncoder {
        PairEncoder(storage: storage, path: path + [component])
    }

    func add(_ value: String) { storage.pairs.append((name, value)) }

    func encodeValue<T: Encodable>(_ value: T) throws {
        switch value {
        case let string as String: add(string)
        case let bool as Bool: add(bool ? "true" : "false")
        case let url as URL: add(url.absoluteString)
        case let date as Date: add(ISO8601DateFormatter().string(from: date))
        case let decimal as Decimal: add("\(decimal)")
        case let number as any BinaryInteger: add("\(number)")
        case let number as Double: add("\(number)")
        case let number as Float: add("\(number)")
        default: try value.encode(to: self)
        }
    }
}

private struct PathKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

private struct KeyedPairContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let encoder: PairEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil(forKey key: Key) throws {}
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try encoder.appending(key.stringValue).encodeValue(value)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type,
        forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        encoder.appending(key.stringValue).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        encoder.appending(key.stringValue).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { encoder }
    mutating func superEncoder(forKey key: Key) -> any Encoder { encoder.appending(key.stringValue) }
}

private struct UnkeyedPairContainer: UnkeyedEncodingContainer {
    let encoder: PairEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count = 0

    mutating func encodeNil() throws { count += 1 }
    mutating func encode<T: Encodable>(_ value: T) throws {
        count += 1
        try encoder.appending("").encodeValue(value)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    )
        -> KeyedEncodingContainer<NestedKey>
    {
        count += 1
        return encoder.appending(String(count - 1)).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        count += 1
        return encoder.appending("").unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { encoder }
}

private struct SinglePairContainer: SingleValueEncodingContainer {
    let encoder: PairEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws { try encoder.encodeValue(value) }
}
