public import Foundation

/// An HTTP cookie as RFC 6265 stores it (§5.3): name, value, where it applies, and its
/// attributes.
public struct Cookie: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The cookie's name.
    public var name: String
    /// The cookie's value, as the server set it.
    public var value: String
    /// Lowercased, without a leading dot.
    public var domain: String
    /// Sent only to `domain` itself, not its subdomains (the cookie had no `Domain`).
    public var hostOnly: Bool
    /// The path the cookie is sent for (and below it).
    public var path: String
    /// `nil` for a session cookie, kept until the store is dropped.
    public var expires: Date?
    /// Sent only over `https`.
    public var secure: Bool
    /// Not for scripts: kept and sent as any other (Ferry runs no scripts).
    public var httpOnly: Bool
    /// `Strict`, `Lax` or `None`, as the server sent it; kept, not enforced (Ferry has no
    /// notion of a top-level site).
    public var sameSite: String?
    /// When the cookie was first stored (RFC 6265 orders cookies by it).
    public var created: Date

    /// A cookie with every attribute given.
    public init(
        name: String,
        value: String,
        domain: String,
        hostOnly: Bool = true,
        path: String = "/",
        expires: Date? = nil,
        secure: Bool = false,
        httpOnly: Bool = false,
        sameSite: String? = nil,
        created: Date = Date()
    ) {
        self.name = name
        self.value = value
        self.domain = domain.lowercased()
        self.hostOnly = hostOnly
        self.path = path
        self.expires = expires
        self.secure = secure
        self.httpOnly = httpOnly
        self.sameSite = sameSite
        self.created = created
    }

    public var description: String { "\(name)=\(value); Domain=\(domain); Path=\(path)" }

    func isExpired(at now: Date) -> Bool { expires.map { $0 <= now } ?? false }

    /// Whether this cookie goes with a request to `url` (RFC 6265 §5.4).
    func matches(_ url: URL, at now: Date) -> Bool {
        guard let host = url.host?.lowercased(), !isExpired(at: now) else { return false }
        if secure && url.scheme?.lowercased() != "https" { return false }
        let domainMatches = hostOnly ? host == domain : Self.domain(host, matches: domain)
        return domainMatches && Self.path(url.requestPath, matches: path)
    }

    /// RFC 6265 §5.1.3.
    static func domain(_ host: String, matches domain: String) -> Bool {
        if host == domain { return true }
        return host.hasSuffix("." + domain) && !host.isIPAddress
    }

    /// RFC 6265 §5.1.4.
    static func path(_ requestPath: String, matches cookiePath: String) -> Bool {
        if requestPath == cookiePath { return true }
        guard requestPath.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || requestPath.dropFirst(cookiePath.count).first == "/"
    }

    /// RFC 6265 §5.1.4's default-path: the request path up to its last `/`.
    static func defaultPath(of url: URL) -> String {
        let path = url.requestPath
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }
}
