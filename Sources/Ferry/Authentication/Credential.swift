/// A user name and password for HTTP Basic (RFC 7617) or Digest (RFC 7616) authentication.
public struct Credential: Sendable, Hashable {
    public var user: String
    public var password: String

    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `Basic base64(user:password)`.
    var authorization: String { BasicAuthentication.headerValue(username: user, password: password) }
}
