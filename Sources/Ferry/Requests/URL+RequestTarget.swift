import Foundation

extension URL {
    /// The path as sent on the request line (RFC 9112 §3.2.1's origin-form), still
    /// percent-encoded; `/` when the URL has none. A URL relative to a base gives the path
    /// it resolves to.
    ///
    /// Read from the parsed URL, not from a `URLComponents` made for it: that parses the URL
    /// again, for each request (and would give a relative URL's own relative path).
    var requestPath: String {
        let path = self.path(percentEncoded: true)
        return path.isEmpty ? "/" : path
    }

    /// The whole origin-form request target: ``requestPath`` and the query.
    var requestTarget: String {
        guard let query = query(percentEncoded: true) else { return requestPath }
        return requestPath + "?" + query
    }

    /// `host` as an authority writes it (RFC 3986 §3.2.2): an IPv6 literal in brackets,
    /// anything else (a name, an IPv4 address, a literal already bracketed) as it is.
    ///
    /// Looks for the colon in the UTF-8 bytes: `String.contains(_:)` with a string argument
    /// is Foundation's `range(of:)`, which bridged to `NSString` and looked up its protocol
    /// conformances on every request (1 % of the CPU of 1,000 small downloads over HTTP/2).
    static func authorityHost(_ host: String) -> String {
        guard host.utf8.contains(UInt8(ascii: ":")), host.utf8.first != UInt8(ascii: "[") else { return host }
        return "[\(host)]"
    }
}

extension URL {
    /// The URL as a base for relative paths: AFNetworking appends a slash to a base URL that
    /// has a path and none at its end, so that `users` under `/v1` is `/v1/users`, not
    /// `/users`.
    var directoryForm: URL {
        guard !path.isEmpty, !absoluteString.hasSuffix("/"), query == nil, fragment == nil else { return self }
        return URL(string: absoluteString + "/") ?? self
    }
}
