public import Foundation

/// Turns a response body into a value: `Data`, a `String` in the response's charset, or a
/// `Decodable`.
///
/// ```swift
/// let user = try await session.value(for: request, as: .decodable(User.self))
/// let page = try await session.value(for: request, as: .string)
/// ```
public protocol ResponseSerializer<Output>: Sendable {
    /// The value the serializer produces.
    associatedtype Output: Sendable
    /// Produces the value, or throws ``FerryError/Reason/serializationFailed``.
    func serialize(_ data: Data, response: HTTPResponse) throws -> Output
}

/// Passes the body through.
public struct DataResponseSerializer: ResponseSerializer {
    /// A serializer that hands back the body as it came.
    public init() {}
    public func serialize(_ data: Data, response: HTTPResponse) throws -> Data { data }
}

/// Decodes the body as text in the charset the response names.
///
/// With no charset, UTF-8 is tried, then ISO-8859-1 (which accepts any bytes).
public struct StringResponseSerializer: ResponseSerializer {
    /// A charset that overrides the response's.
    public var encoding: String.Encoding?

    /// A serializer that decodes the body as text in `encoding`, or in the response's charset (UTF-8 when it names none).
    public init(encoding: String.Encoding? = nil) { self.encoding = encoding }

    public func serialize(_ data: Data, response: HTTPResponse) throws -> String {
        let declared = encoding ?? response.textEncodingName.flatMap(Self.encoding(named:))
        if let declared {
            guard let text = String(data: data, encoding: declared) else {
                throw FerryError(
                    .serializationFailed,
                    "The body is not valid \(response.textEncodingName ?? "text") text.",
                    response: response
                )
            }
            return text
        }
        if let text = String(validating: data, as: UTF8.self) { return text }
        return String(String.UnicodeScalarView(data.map { Unicode.Scalar($0) }))
    }

    /// Maps an IANA charset name to a `String.Encoding`.
    public static func encoding(named name: String) -> String.Encoding? {
        switch name.lowercased() {
        case "utf-8", "utf8": .utf8
        case "us-ascii", "ascii": .ascii
        case "iso-8859-1", "latin1", "iso_8859-1": .isoLatin1
        case "iso-8859-2": .isoLatin2
        case "windows-1252", "cp1252": .windowsCP1252
        case "utf-16": .utf16
        case "utf-16le": .utf16LittleEndian
        case "utf-16be": .utf16BigEndian
        case "utf-32": .utf32
        case "shift_jis": .shiftJIS
        case "euc-jp": .japaneseEUC
        default: nil
        }
    }
}

/// Decodes the body as JSON into `Value`.
public struct DecodableResponseSerializer<Value: Decodable & Sendable>: ResponseSerializer {
    private let makeDecoder: @Sendable () -> JSONDecoder

    /// A serializer that decodes `Value` from the body with a new decoder from `decoder`.
    public init(_ type: Value.Type = Value.self, decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }) {
        self.makeDecoder = decoder
    }

    public func serialize(_ data: Data, response: HTTPResponse) throws -> Value {
        // An empty body (a 204, a 205, an answer to HEAD, or just nothing) decodes as `nil`
        // for an `Optional` and as the empty value of an ``EmptyResponse`` (such as
        // ``Empty``), as AFNetworking gives `nil` and Alamofire `Empty.value`.
        if data.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            if let empty = Value.self as? any EmptyResponse.Type, let value = empty.emptyValue() as? Value {
                return value
            }
            if let optional = Value.self as? any ExpressibleByNilLiteral.Type,
                let value = optional.init(nilLiteral: ()) as? Value
            {
                return value
            }
            throw FerryError(
                .serializationFailed,
                "The response of \(response.url.absoluteString) (\(response.statusCode)) has no body to decode \(Value.self) from; decode an Optional or Empty to accept one.",
                response: response
            )
        }
        do {
            return try makeDecoder().decode(Value.self, from: data)
        } catch {
            throw FerryError(
                .serializationFailed,
                "Could not decode \(Value.self) from the response of \(response.url.absoluteString).",
                response: response,
                underlying: error
            )
        }
    }
}

extension ResponseSerializer where Self == DataResponseSerializer {
    /// The body as `Data`.
    public static var data: DataResponseSerializer { .init() }
}

extension ResponseSerializer where Self == StringResponseSerializer {
    /// The body as a `String` in the response's charset.
    public static var string: StringResponseSerializer { .init() }
}

extension ResponseSerializer {
    /// The body decoded as JSON.
    public static func decodable<Value>(
        _ type: Value.Type,
        decoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    )
        -> DecodableResponseSerializer<Value>
    where Self == DecodableResponseSerializer<Value> {
        .init(type, decoder: decoder)
    }
}

/// A type with a value for a response that has no body: ``DecodableResponseSerializer``
/// gives ``emptyValue()`` for a `204`, a `205`, an answer to `HEAD` or any empty body.
public protocol EmptyResponse {
    /// The value an empty body decodes as.
    static func emptyValue() -> Self
}

/// The value of a response whose body is empty or of no interest: decode `Empty` from a
/// `204 No Content` (Alamofire's `Empty`).
///
/// ```swift
/// let manager = try HTTPSessionManager(baseURL: api, responseSerializer: .decodable(Empty.self))
/// ```
public struct Empty: Codable, Sendable, Equatable, EmptyResponse {
    /// The empty value.
    public static let value = Empty()

    /// The empty value.
    public init() {}

    public static func emptyValue() -> Empty { value }
}
