import Foundation
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a transfer tells ``SessionConfiguration/logger`` of each request and response: its
/// logger's messages carry the task's identifier (`ferry-task`); heads carry their text,
/// credentials redacted, under `ferry-head` (`ferry get -v` prints them as `curl -v` does).
extension Logger {
    /// Logs a request's head as it goes out.
    func logHead(of request: URLRequest) {
        debug(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)",
                "url": "\(request.url?.absoluteString ?? "")",
                HeadText.kindKey: "request",
                HeadText.key: "\(HeadText.request(request))",
            ]
        )
    }

    /// Logs a response's head as it arrives.
    func logHead(of head: HTTPResponse) {
        debug(
            "response",
            metadata: [
                "status": "\(head.statusCode)",
                "url": "\(head.url.absoluteString)",
                HeadText.kindKey: "response",
                HeadText.key: "\(HeadText.response(head))",
            ]
        )
    }
}

/// Request and response heads as text (`GET /path HTTP/1.1`, fields one a line), with the
/// values of credential fields replaced by `<redacted>`.
enum HeadText {
    /// The metadata key of a head's text, and its kind (`request` or `response`).
    static let key = "ferry-head"
    static let kindKey = "ferry-head-kind"
    /// The credential fields, and the cookies a response sets.
    static let secretFields = HeaderFields.credentialNames.union(["set-cookie"])

    static func request(_ request: URLRequest) -> String {
        var lines: [String] = []
        let url = request.url
        var target = url?.path.isEmpty == false ? url?.path ?? "/" : "/"
        if let query = url?.query { target += "?" + query }
        lines.append("\(request.method.rawValue) \(target) HTTP/1.1")
        if let host = url?.host {
            lines.append("Host: \(host)\(url?.port.map { ":\($0)" } ?? "")")
        }
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            lines.append("\(name): \(shown(name, value))")
        }
        return lines.joined(separator: "\n")
    }

    static func response(_ head: HTTPResponse) -> String {
        var lines = [
            "\(head.httpVersion) \(head.statusCode)\(head.reasonPhrase.isEmpty ? "" : " " + head.reasonPhrase)"
        ]
        for field in head.headers { lines.append("\(field.name): \(shown(field.name, field.value))") }
        return lines.joined(separator: "\n")
    }

    private static func shown(_ name: String, _ value: String) -> String {
        secretFields.contains(name.lowercased()) ? "<redacted>" : value
    }
}
