public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Puts parameters into a request: its query, a form-encoded body, or a JSON body.
///
/// A protocol with three built-in encoders, reached by static factories:
///
/// ```swift
/// var request = URLRequest(url: url)
/// request = try URLEncodedFormParameterEncoder.query.encode(["q": "swift nio", "page": "2"], into: request)
/// request = try JSONParameterEncoder.default.encode(Login(user: "ada"), into: request)
/// ```
public protocol ParameterEncoder: Sendable {
    /// Returns `request` with `parameters` encoded into it.
    func encode<Parameters: Encodable>(
        _ parameters: Parameters,
        into request: URLRequest
    ) throws
        -> URLRequest
}

/// Encodes an `Encodable` value as a JSON body with `Content-Type: application/json`.
public struct JSONParameterEncoder: ParameterEncoder {
    /// Sorted keys, so the same value gives the same bytes.
    public static let `default` = JSONParameterEncoder()

    private let makeEncoder: @Sendable () -> JSONEncoder

    /// Creates an encoder that configures a `JSONEncoder` per call.
    public init(
        _ makeEncoder: @escaping @Sendable () -> JSONEncoder = {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return encoder
        }
    ) {
        self.makeEncoder = makeEncoder
    }

    public func encode<Parameters: Encodable>(
        _ parameters: Parameters,
        into request: URLRequest
    )
        throws -> URLRequest
    {
        var request = request
        do {
            request.httpBody = try makeEncoder().encode(parameters)
        } catch {
            throw FerryError(.invalidRequest, "Could not encode the JSON body.", underlying: error)
        }
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return request
    }
}

/// Encodes name/value pairs into the URL's query or an `application/x-www-form-urlencoded`
/// body (WHATWG URL standard's serializer: space as `+`, everything but `*-._` and
/// alphanumerics percent-encoded).
///
/// Parameters are a `[String: String]` (sorted by name for stable output) or an ordered
/// `[(String, String)]`-like `KeyValuePairs`.
public struct URLEncodedFormParameterEncoder: ParameterEncoder {
    /// Where the encoded parameters go.
    public enum Destination: Sendable {
        /// Appended to the URL's query.
        case query
        /// The request body, with `Content-Type: application/x-www-form-urlencoded`.
        case body
    }

    /// How an array's elements are named.
    @nonexhaustive
    public enum ArrayEncoding: Sendable, Equatable {
        /// The array's name for every element: `tag=a&tag=b` (what most servers read).
        case repeatedName
        /// The array's name with empty brackets: `tag[]=a&tag[]=b` (AFNetworking's
        /// `AFQueryStringFromParameters`, and what PHP and Rails read as an array).
        case brackets
    }

    /// The destination.
    public var destination: Destination
    /// How arrays are written; ``ArrayEncoding/repeatedName`` unless set.
    public var arrayEncoding: ArrayEncoding

    /// Creates an encoder for `destination`.
    ///
    /// - Parameters:
    ///   - destination: The query or the body.
    ///   - arrayEncoding: How arrays are written (``HTTPSessionManager`` uses
    ///     ``ArrayEncoding/brackets``, as AFNetworking does).
    public init(destination: Destination, arrayEncoding: ArrayEncoding = .repeatedName) {
        self.destination = destination
        self.arrayEncoding = arrayEncoding
    }

    public func encode<Parameters: Encodable>(
        _ parameters: Parameters,
        into request: URLRequest
    )
        throws -> URLRequest
    {
        let pairs = try FormPairsEncoder.pairs(from: parameters, arrays: arrayEncoding)
        return try encode(pairs: pairs, into: request)
    }

    /// Encodes ordered pairs, keeping their order.
    public func encode(pairs: [(String, String)], into request: URLRequest) throws -> URLRequest {
        var request = request
        let encoded = Self.serialize(pairs)
        switch destination {
        case .query:
            guard let url = request.url,
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false)
            else { throw FerryError(.invalidURL, "The request has no URL to add a query to.") }
            guard !encoded.isEmpty else { return request }
            let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
            components.percentEncodedQuery = existing + encoded
            request.url = components.url
        case .body:
            request.httpBody = Data(encoded.utf8)
            if request.value(forHTTPHeaderField: "Content-Type") == nil {
                request.setValue(
                    "application/x-www-form-urlencoded; charset=utf-8",
                    forHTTPHeaderField: "Content-Type"
                )
            }
        }
        return request
    }

    /// `application/x-www-form-urlencoded` serialization of ordered pairs.
    public static func serialize(_ pairs: [(String, String)]) -> String {
        pairs.map { escape($0.0) + "=" + escape($0.1) }.joined(separator: "&")
    }

    static func escape(_ string: String) -> String {
        var result = ""
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "*"), UInt8(ascii: "-"),
                UInt8(ascii: "."), UInt8(ascii: "_"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: " "):
                result.append("+")
            default:
                result += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return result
    }
}

extension ParameterEncoder where Self == URLEncodedFormParameterEncoder {
    /// Parameters in the URL's query.
    public static var query: URLEncodedFormParameterEncoder { .init(destination: .query) }
    /// Parameters as a form-encoded body.
    public static var form: URLEncodedFormParameterEncoder { .init(destination: .body) }
}

extension ParameterEncoder where Self == JSONParameterEncoder {
    /// Parameters as a JSON body.
    public static var json: JSONParameterEncoder { .default }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
