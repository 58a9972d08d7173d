public import Foundation

/// A proxy a session's connections go through: HTTP (every request tunnelled with
/// `CONNECT`, for `http` and `https` alike) or SOCKS5 (URLSession's
/// `connectionProxyDictionary`).
///
/// ```swift
/// configuration.proxy = .http(host: "proxy.internal", port: 3128,
///                             credential: Credential(user: "me", password: "…"),
///                             bypass: ["localhost", ".internal"])
/// ```
public struct Proxy: Sendable, Hashable {
    /// How Ferry speaks to the proxy. Later versions may add kinds: switch with an
    /// `@unknown default`.
    @nonexhaustive(warn)
    public enum Kind: Sendable, Hashable {
        /// An HTTP proxy, spoken to with `CONNECT`; `Proxy-Authorization: Basic` when a
        /// credential is given.
        case http
        /// A SOCKS5 proxy (RFC 1928); with a credential, username / password
        /// authentication (RFC 1929).
        case socks5
        /// An HTTP proxy reached over TLS (`https://proxy`). Not supported yet: a session
        /// configured with one fails to start with
        /// ``FerryError/Reason/unsupportedConfiguration``, rather than send the proxy's
        /// `CONNECT` and credentials in clear.
        case https
    }

    /// HTTP (CONNECT for https) or SOCKS5.
    public var kind: Kind
    /// The proxy's host.
    public var host: String
    /// The proxy's port.
    public var port: Int
    /// Sent to an HTTP proxy as `Proxy-Authorization: Basic` with every `CONNECT`; to a
    /// SOCKS5 proxy as its username / password (RFC 1929) when it asks for them.
    public var credential: Credential?
    /// Hosts reached directly, as curl's `no_proxy`: a name matches itself and its
    /// subdomains (`example.com` and `.example.com` both cover `a.example.com`); `*` matches
    /// every host.
    public var bypass: [String]

    /// A proxy of `kind` at `host`:`port`, with optional credentials and hosts that bypass it.
    public init(kind: Kind, host: String, port: Int, credential: Credential? = nil, bypass: [String] = []) {
        self.kind = kind
        self.host = host
        self.port = port
        self.credential = credential
        self.bypass = bypass
    }

    /// An HTTP proxy: plain requests through it, `https` by CONNECT.
    public static func http(host: String, port: Int, credential: Credential? = nil, bypass: [String] = []) -> Proxy {
        Proxy(kind: .http, host: host, port: port, credential: credential, bypass: bypass)
    }

    /// A SOCKS5 proxy; `credential` answers its username / password authentication
    /// (RFC 1929). (Like curl's, the user name and password cross the network in clear.)
    public static func socks5(
        host: String,
        port: Int = 1080,
        credential: Credential? = nil,
        bypass: [String] = []
    ) -> Proxy {
        Proxy(kind: .socks5, host: host, port: port, credential: credential, bypass: bypass)
    }

    /// Whether Ferry opens the tunnel itself (through its TLS bridge) rather than
    /// AsyncHTTPClient: for an HTTP proxy (to answer a `407`) and for a SOCKS5 proxy with a
    /// credential (AsyncHTTPClient's SOCKS client offers no authentication).
    var isBridged: Bool {
        switch kind {
        case .http: true
        case .socks5: credential != nil
        case .https: false
        }
    }

    /// Whether a request to `url` goes through this proxy.
    public func applies(to url: URL) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        for entry in bypass {
            var name = entry.trimmingWhitespace().lowercased()
            if name == "*" { return false }
            if name.hasPrefix(".") { name.removeFirst() }
            if name.isEmpty { continue }
            if host == name || host.hasSuffix("." + name) { return false }
        }
        return true
    }

    /// The proxy curl would use for `url` given `environment`: `https_proxy` for https,
    /// `http_proxy` (lowercase only, as curl, since CGI sets `HTTP_PROXY` from a request
    /// header) for http, `all_proxy` otherwise; `no_proxy` as ``bypass``. Values are
    /// `[scheme://][user:password@]host[:port]`; `socks5://` and `socks5h://` give SOCKS5,
    /// anything else HTTP (default port 1080).
    public static func fromEnvironment(_ environment: [String: String], for url: URL) -> Proxy? {
        func value(_ name: String, uppercase: Bool = true) -> String? {
            let found = environment[name] ?? (uppercase ? environment[name.uppercased()] : nil)
            return found?.isEmpty == false ? found : nil
        }
        let scheme = url.scheme?.lowercased()
        let raw =
            (scheme == "https" ? value("https_proxy") : scheme == "http" ? value("http_proxy", uppercase: false) : nil)
            ?? value("all_proxy")
        guard let raw, var proxy = Proxy(address: raw) else { return nil }
        proxy.bypass = (value("no_proxy") ?? "").split(separator: ",").map(String.init)
        return proxy.applies(to: url) ? proxy : nil
    }

    /// A proxy written as curl takes it: `[scheme://][user:password@]host[:port]`, where
    /// `socks5://` or `socks5h://` means SOCKS5, `http://` (or nothing) HTTP, and `https://`
    /// ``Kind/https`` (which a session refuses); the port defaults to 1080. `nil` for
    /// anything else.
    public init?(address text: String) {
        let withScheme = text.contains("://") ? text : "http://" + text
        guard let components = URLComponents(string: withScheme), let host = components.host, !host.isEmpty else {
            return nil
        }
        let scheme = components.scheme?.lowercased() ?? "http"
        let kind: Kind = scheme.hasPrefix("socks5") ? .socks5 : scheme == "https" ? .https : .http
        guard kind != .http || scheme == "http" else { return nil }
        let credential = components.user.map {
            Credential(
                user: $0.removingPercentEncoding ?? $0,
                password: components.password?.removingPercentEncoding ?? ""
            )
        }
        self.init(kind: kind, host: host, port: components.port ?? 1080, credential: credential, bypass: [])
    }
}
