import Ferry
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request every `ferry` command sends: an http(s) URL and `-H` headers; `-u` becomes the
/// session's credential, which answers the server's challenge (Digest or Basic) for the
/// request's own origin.
enum CommandRequest {
    /// `Name: value`, or `nil` when `header` is not one (no colon, a name with spaces, CR/LF).
    static func parseHeader(_ header: String) -> (String, String)? {
        guard let colon = header.firstIndex(of: ":") else { return nil }
        let name = header[..<colon].trimmingCharacters(in: .whitespaces)
        let value = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !name.contains(" "), !header.contains("\r"), !header.contains("\n") else { return nil }
        return (name, value)
    }

    /// The usage error for the first `-H` argument that is not a header, if any.
    static func headerProblem(in headers: [String]) -> String? {
        headers.first { parseHeader($0) == nil }.map { "'\($0)' is not a header: use 'Name: value'." }
    }

    /// The request, or `nil` when `url` is not an http or https URL with a host.
    static func make(url: String, method: HTTPMethod, headers: [String]) -> URLRequest? {
        guard let target = URL(string: url), let scheme = target.scheme?.lowercased(),
            scheme == "http" || scheme == "https", target.host?.isEmpty == false
        else { return nil }
        var request = URLRequest(url: target, method: method)
        for header in headers {
            if let (name, value) = parseHeader(header) { request.addValue(value, forHTTPHeaderField: name) }
        }
        return request
    }

    /// `-u user:password` as the session's credential.
    static func credential(from user: String?) -> Credential? {
        guard let user else { return nil }
        let (name, password) = BasicAuthentication.parseUserPassword(user)
        return Credential(user: name, password: password)
    }
}
