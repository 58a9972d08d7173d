/// A user name and password for HTTP Basic (RFC 7617) or Digest (RFC 7616) authentication.
public struct Credential: Sendable, Hashable {
    /// The user name.
    public var user: String
    /// The password.
    public var password: String

    /// A user name and password.
    public init(user: String, password: String) {
        self.user = user
        self.password = password
    }

    /// `Basic base64(user:password)`.
    var authorization: String { BasicAuthentication.headerValue(username: user, password: password) }
}
