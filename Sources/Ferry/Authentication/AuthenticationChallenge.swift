public import Foundation

/// Where credentials apply: an origin, a realm, and an authentication scheme — what
/// `URLProtectionSpace` describes for URLSession.
public struct ProtectionSpace: Hashable, Sendable, CustomStringConvertible {
    /// An HTTP authentication scheme.
    public struct AuthenticationMethod: Hashable, Sendable, CustomStringConvertible {
        /// The scheme's name, lowercased (`basic`, `digest`, `bearer`, …).
        public let name: String
        /// A method by its scheme name, compared case-insensitively (`Basic`, `Digest`, …).
        public init(_ name: String) { self.name = name.lowercased() }

        /// RFC 7617.
        public static let basic = AuthenticationMethod("basic")
        /// RFC 7616.
        public static let digest = AuthenticationMethod("digest")

        public var description: String { name }
    }

    /// `http` or `https`.
    public var scheme: String
    /// The host that asked: the origin's, or the proxy's.
    public var host: String
    /// The port of that host.
    public var port: Int
    /// The challenge's `realm`; `nil` for a space that covers every realm of the origin (only
    /// when looking credentials up in a ``CredentialStore``).
    public var realm: String?
    /// The challenge's scheme.
    public var authenticationMethod: AuthenticationMethod
    /// A proxy asked (`407` with `Proxy-Authenticate`); `host` and `port` are the proxy's.
    public var isProxy: Bool

    /// A protection space: where a challenge came from and for which realm and scheme.
    public init(
        scheme: String,
        host: String,
        port: Int,
        realm: String?,
        authenticationMethod: AuthenticationMethod,
        isProxy: Bool = false
    ) {
        self.scheme = scheme.lowercased()
        self.host = host.lowercased()
        self.port = port
        self.realm = realm
        self.authenticationMethod = authenticationMethod
        self.isProxy = isProxy
    }

    /// The space of `url`'s origin (default port filled in).
    public init(url: URL, realm: String?, authenticationMethod: AuthenticationMethod) {
        let origin = Origin(url)
        self.init(
            scheme: origin.scheme,
            host: origin.host,
            port: origin.port,
            realm: realm,
            authenticationMethod: authenticationMethod
        )
    }

    public var description: String {
        (isProxy ? "proxy " : "") + "\(authenticationMethod) \(scheme)://\(host):\(port)"
            + (realm.map { " realm \"\($0)\"" } ?? "")
    }
}

/// A server asked for credentials: a `401` with `WWW-Authenticate`, or the session's proxy a
/// `407` with `Proxy-Authenticate` (``ProtectionSpace/isProxy``).
///
/// Delivered to ``SessionDelegate/session(_:task:didReceive:)-(_,_,AuthenticationChallenge)`` before the session's own
/// handling (``SessionConfiguration/credential``, then ``SessionConfiguration/credentialStore``).
public struct AuthenticationChallenge: Sendable {
    /// The strongest scheme Ferry can answer among those the server offered.
    public let protectionSpace: ProtectionSpace
    /// How many times credentials were already sent for this request and refused.
    public let previousFailureCount: Int
    /// The `401` response.
    public let failureResponse: HTTPResponse
    /// A credential the session would use by default, if it has one.
    public let proposedCredential: Credential?
}

/// The delegate's answer to an ``AuthenticationChallenge`` (URLSession's
/// `AuthChallengeDisposition`).
public enum ChallengeDisposition: Sendable, Equatable {
    /// Answer with this credential.
    case useCredential(Credential)
    /// Do what the session does without a delegate: its configured credential, then its store.
    case performDefaultHandling
    /// Fail the task (``FerryError/Reason/cancelledByDelegate``).
    case cancelAuthenticationChallenge
    /// Send no credentials: the task completes with the `401` response.
    case rejectProtectionSpace
}
