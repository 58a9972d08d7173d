import Foundation

extension URL {
    /// The path as sent on the request line (RFC 9112 §3.2.1's origin-form), still
    /// percent-encoded; `/` when the URL has none.
    var requestPath: String {
        let path = URLComponents(url: self, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? ""
        return path.isEmpty ? "/" : path
    }

    /// The whole origin-form request target: ``requestPath`` and the query.
    var requestTarget: String {
        let query = URLComponents(url: self, resolvingAgainstBaseURL: false)?.percentEncodedQuery
        return requestPath + (query.map { "?" + $0 } ?? "")
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
