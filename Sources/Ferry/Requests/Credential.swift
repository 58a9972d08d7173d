/// A user name and password for HTTP Basic authentication (RFC 7617).
public struct Credential: Sendable, Equatable {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `Basic base64(user:password)`.
    var authorization: String { BasicAuthentication.headerValue(username: user, password: password) }

    /// Whether `challenge` (a `WWW-Authenticate` value) offers the Basic scheme.
    static func offersBasic(_ challenge: String?) -> Bool {
        guard let challenge else { return false }
        return challenge.split(separator: ",").contains { (item: Substring) in
            String(item).trimmingWhitespace().lowercased().hasPrefix("basic")
        }
    }
}
