import Foundation
import Logging
import NIOHTTP1

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a transfer tells ``SessionConfiguration/logger`` of each request and response: its
/// logger's messages carry the task's identifier (`ferry-task`); heads carry their text,
/// credentials redacted, under `ferry-head` (`ferry get -v` prints them as `curl -v` does).
extension Logger {
    /// Logs a request's head: as `exchange` sent it when there is one (the fields that went
    /// out: the session's, `Host`, `Accept-Encoding`; on the request line the version it went
    /// over; over HTTP/2 its header block as curl shows it, `[HTTP/2] [:method: GET]`, …),
    /// else as the request has it (no answer said which version it went over).
    func logHead(of request: URLRequest, sentAs exchange: Engine.Exchange? = nil) {
        debug(
            "request",
            metadata: [
                "method": "\(request.method.rawValue)",
                "url": "\(request.url?.absoluteString ?? "")",
                HeadText.kindKey: "request",
                HeadText.key: "\(HeadText.request(request, sentAs: exchange))",
                HeadText.notesKey:
                    "\(exchange.map { HeadText.http2Notes(request, fields: $0.sentFields, version: $0.head.version) } ?? "")",
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
/// values of credential fields replaced by `<redacted>` and those of signed query
/// parameters, in the target and in URLs the fields carry (`Location`), by `REDACTED`
/// (``Redaction``).
enum HeadText {
    /// The metadata key of a head's text, and its kind (`request` or `response`).
    static let key = "ferry-head"
    static let kindKey = "ferry-head-kind"
    /// Lines said before a head (`* ` in `ferry get -v`): an HTTP/2 request's header block.
    static let notesKey = "ferry-head-notes"
    /// The credential fields, and the cookies a response sets.
    static let secretFields = HeaderFields.credentialNames.union(["set-cookie"])

    /// The head as `exchange` sent it, or as `request` has it.
    static func request(_ request: URLRequest, sentAs exchange: Engine.Exchange?) -> String {
        guard let exchange else { return Self.request(request) }
        return Self.request(request, fields: exchange.sentFields, version: exchange.head.version)
    }

    static func request(_ request: URLRequest) -> String {
        var lines: [String] = []
        let url = request.url
        var target = url?.path.isEmpty == false ? url?.path ?? "/" : "/"
        if let query = url?.query { target = Redaction.redactingQuery(of: target + "?" + query) }
        lines.append("\(request.method.rawValue) \(target) HTTP/1.1")
        if let host = url?.host {
            lines.append("Host: \(host)\(url?.port.map { ":\($0)" } ?? "")")
        }
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            lines.append("\(name): \(shown(name, value))")
        }
        return lines.joined(separator: "\n")
    }

    /// The head as it went out: `Host` first (the client adds it when the fields lack
    /// it), then the fields in the order sent; over HTTP/2 the request line says `HTTP/2`.
    static func request(_ request: URLRequest, fields: HTTPHeaders, version: HTTPVersion) -> String {
        let url = request.url
        var lines = [
            "\(request.method.rawValue) \(Redaction.redactingQuery(of: url?.requestTarget ?? "/")) \(name(of: version))"
        ]
        if !fields.contains(name: "Host"), let host = url?.host {
            lines.append("Host: \(URL.authorityHost(host))\(url?.port.map { ":\($0)" } ?? "")")
        }
        for (name, value) in fields where !HeaderFields.sameName(name, BridgeRelay.traceField) {
            lines.append("\(name): \(shown(name, value))")
        }
        return lines.joined(separator: "\n")
    }

    /// An HTTP/2 request's header block, pseudo-fields first, a field a line as curl shows
    /// it (`[HTTP/2] [:path: /f]`); empty over HTTP/1.
    static func http2Notes(_ request: URLRequest, fields: HTTPHeaders, version: HTTPVersion) -> String {
        guard version.major >= 2, let url = request.url else { return "" }
        var sent = fields
        sent.remove(name: BridgeRelay.traceField)
        let block = HTTP2Connection.headerBlock(
            method: NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue),
            url: url,
            fields: sent
        )
        return block.map { field in
            let value =
                field.name == ":path" ? Redaction.redactingQuery(of: field.value) : shown(field.name, field.value)
            return "[HTTP/2] [\(field.name): \(value)]"
        }
        .joined(separator: "\n")
    }

    /// `HTTP/1.1`, `HTTP/1.0`, `HTTP/2`: as a request line and curl write it.
    private static func name(of version: HTTPVersion) -> String {
        version.major >= 2 ? "HTTP/\(version.major)" : "HTTP/\(version.major).\(version.minor)"
    }

    /// A response's version as curl shows it: `HTTP/2` for HTTP/2, HTTP/1's as it came.
    private static func shownVersion(of head: HTTPResponse) -> String {
        head.httpVersion.hasPrefix("HTTP/1") ? head.httpVersion : "HTTP/\(head.shortVersion)"
    }

    static func response(_ head: HTTPResponse) -> String {
        // HTTP/2 has no reason phrase (RFC 9113 §8.3.2): the one NIO supplies is not shown.
        let reason = head.httpVersion.hasPrefix("HTTP/1") && !head.reasonPhrase.isEmpty ? " " + head.reasonPhrase : ""
        var lines = ["\(shownVersion(of: head)) \(head.statusCode)\(reason)"]
        for field in head.headers { lines.append("\(field.name): \(shown(field.name, field.value))") }
        return lines.joined(separator: "\n")
    }

    private static func shown(_ name: String, _ value: String) -> String {
        secretFields.contains(name.lowercased()) ? "<redacted>" : Redaction.redactingURLs(in: value)
    }
}
