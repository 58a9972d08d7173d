/// An HTTP request method (RFC 9110 §9).
///
/// ```swift
/// var request = URLRequest(url: url)
/// request.method = .put
/// ```
public struct HTTPMethod: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral {
    public var rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue.uppercased() }
    public init(stringLiteral value: String) { self.init(rawValue: value) }

    /// `GET`.
    public static let get: HTTPMethod = "GET"
    /// `HEAD`.
    public static let head: HTTPMethod = "HEAD"
    /// `POST`.
    public static let post: HTTPMethod = "POST"
    /// `PUT`.
    public static let put: HTTPMethod = "PUT"
    /// `PATCH`.
    public static let patch: HTTPMethod = "PATCH"
    /// `DELETE`.
    public static let delete: HTTPMethod = "DELETE"
    /// `OPTIONS`.
    public static let options: HTTPMethod = "OPTIONS"
    /// `TRACE`.
    public static let trace: HTTPMethod = "TRACE"
    /// `CONNECT`: a data task that becomes a ``StreamTask`` through an HTTP proxy.
    public static let connect: HTTPMethod = "CONNECT"

    /// Whether the method is safe (RFC 9110 §9.2.1): GET, HEAD, OPTIONS, TRACE.
    public var isSafe: Bool { [.get, .head, .options, .trace].contains(self) }
}
