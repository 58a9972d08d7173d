public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// Ferry's conveniences on Foundation's request: a typed method, headers at creation, Basic credentials.
extension URLRequest {
    /// The request's method as an ``HTTPMethod`` (`GET` when unset).
    public var method: HTTPMethod {
        get { HTTPMethod(rawValue: httpMethod ?? "GET") }
        set { httpMethod = newValue.rawValue }
    }

    /// Creates a request for `url` with a method and extra header fields.
    ///
    /// ```swift
    /// let request = URLRequest(url: url, method: .post, headers: ["Accept": "application/json"])
    /// ```
    public init(url: URL, method: HTTPMethod, headers: HeaderFields = [:]) {
        self.init(url: url)
        self.method = method
        for field in headers { addValue(field.value, forHTTPHeaderField: field.name) }
    }

    /// Sets `Authorization: Basic …` from a user name and password (RFC 7617, UTF-8).
    public mutating func setBasicAuthorization(username: String, password: String) {
        setValue(
            BasicAuthentication.headerValue(username: username, password: password),
            forHTTPHeaderField: "Authorization"
        )
    }
}

/// HTTP Basic authentication (RFC 7617).
public enum BasicAuthentication {
    /// `Basic base64(user:password)`, encoded as UTF-8.
    public static func headerValue(username: String, password: String) -> String {
        "Basic " + Data("\(username):\(password)".utf8).base64EncodedString()
    }

    /// Splits curl's `user:password` form at the first colon; a missing password is empty.
    public static func parseUserPassword(_ value: String) -> (username: String, password: String) {
        guard let colon = value.firstIndex(of: ":") else { return (value, "") }
        return (String(value[..<colon]), String(value[value.index(after: colon)...]))
    }
}
