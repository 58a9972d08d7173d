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
