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
