import Foundation
import NIOCore
import NIOHTTP1

extension Responder {
    // MARK: Other routes

    func redirect(_ segments: [String]) async throws -> Bool {
        let remaining = segments.count >= 2 ? Int(segments[1]) ?? 1 : 1
        let status = HTTPResponseStatus(statusCode: Int(request.query["status"] ?? "302") ?? 302)
        var query = request.query
        query.removeValue(forKey: "status")
        let target: String
        if remaining > 1 {
            target = "/redirect/\(remaining - 1)" + Self.queryString(request.query)
        } else {
            target = request.query["to"] ?? "/bytes/16"
        }
        return try await send(status, headers: [("Location", target)], body: Data("redirecting\n".utf8))
    }

    func basicAuth(_ segments: [String]) async throws -> Bool {
        let user = segments.count >= 2 ? segments[1] : "user"
        let password = segments.count >= 3 ? segments[2] : "pass"
        let expected = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        if request.headers.first(name: "authorization") == expected {
            return try await json(.ok, ["authenticated": true, "user": user])
        }
        return try await send(
            .unauthorized,
            headers: [("WWW-Authenticate", "Basic realm=\"ferry\""), ("Content-Type", "text/plain")],
            body: Data("authentication required\n".utf8)
        )
    }

    /// `/cached/NAME`: "NAME vN" with `ETag: "vN"` (N from ``FerryTestServer/setVersion``'s
    /// seed, 0 by default) and `Cache-Control` from `?cc=` (default `max-age=60`); answers
    /// `304` to a matching `If-None-Match`. `?vary=Name` adds `Vary: Name` and puts that
    /// request field's value in the body.
    func cached(_ segments: [String]) async throws -> Bool {
        let name = segments.count >= 2 ? segments[1] : "default"
        let version = server.versions.withLock { $0[name]?.seed } ?? 0
        let tag = "\"v\(version)\""
        var headers: [(String, String)] = [
            ("ETag", tag), ("Cache-Control", request.query["cc"] ?? "max-age=60"), ("Date", Self.httpDate(Date())),
        ]
        var body = "\(name) v\(version)"
        if let vary = request.query["vary"] {
            headers.append(("Vary", vary))
            body += " for \(request.headers.first(name: vary) ?? "-")"
        }
        if request.headers.first(name: "if-none-match") == tag {
            return try await send(.notModified, headers: headers, body: nil)
        }
        headers.append(("Content-Type", "text/plain"))
        return try await send(.ok, headers: headers, body: Data(body.utf8))
    }

    /// `/cookies` echoes the `Cookie` header as JSON; `/cookies/set?h=SET-COOKIE` sends that
    /// `Set-Cookie` field (raw) and echoes too; `/cookies/redirect?h=SET-COOKIE&to=PATH` sets
    /// it on a 302.
    func cookies(_ segments: [String]) async throws -> Bool {
        var headers: [(String, String)] = []
        if let field = request.query["h"] { headers.append(("Set-Cookie", field)) }
        if segments.count >= 2, segments[1] == "redirect" {
            headers.append(("Location", request.query["to"] ?? "/cookies"))
            return try await send(.found, headers: headers, body: nil)
        }
        let body = try JSONSerialization.data(
            withJSONObject: ["cookie": request.headers.first(name: "cookie") ?? ""],
            options: [.sortedKeys]
        )
        headers.append(("Content-Type", "application/json"))
        return try await send(.ok, headers: headers, body: body)
    }

    /// `/digest-auth/QOP/USER/PASSWORD[/ALGORITHM]` (httpbin's shape): QOP `auth` or `none`;
    /// ALGORITHM `MD5` (default), `MD5-sess`, `SHA-256`, `SHA-256-sess`. `?also-basic` offers
    /// a Basic challenge too, first.
    func digestAuth(_ segments: [String]) async throws -> Bool {
        let verifier = DigestVerifier(
            realm: "ferry-digest",
            user: segments.count >= 3 ? segments[2] : "user",
            password: segments.count >= 4 ? segments[3] : "pass",
            algorithm: segments.count >= 5 ? segments[4] : "MD5",
            qop: segments.count >= 2 && segments[1] != "none" ? segments[1] : ""
        )
        let authorization = request.headers.first(name: "authorization")
        if verifier.accepts(authorization, method: request.method.rawValue, uri: request.head.uri) {
            return try await json(.ok, ["authenticated": true, "user": verifier.user])
        }
        let nonce = UUID().uuidString
        var headers: [(String, String)] = []
        if request.flag("also-basic") { headers.append(("WWW-Authenticate", "Basic realm=\"ferry-basic\"")) }
        headers.append(("WWW-Authenticate", verifier.challenge(nonce: nonce, opaque: "ferry-opaque")))
        headers.append(("Content-Type", "text/plain"))
        return try await send(.unauthorized, headers: headers, body: Data("authentication required\n".utf8))
    }

    static func queryString(_ query: [String: String]) -> String {
        guard !query.isEmpty else { return "" }
        var components = URLComponents()
        components.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return "?" + (components.percentEncodedQuery ?? "")
    }

    // MARK: Writing

    func head(_ status: HTTPResponseStatus, _ headers: [(String, String)]) -> HTTPResponseHead {
        var fields = HTTPHeaders(headers)
        if !request.head.isKeepAlive { fields.replaceOrAdd(name: "Connection", value: "close") }
        return HTTPResponseHead(version: .http1_1, status: status, headers: fields)
    }

    func send(_ status: HTTPResponseStatus, headers: [(String, String)], body: Data?) async throws -> Bool {
        var headers = headers
        headers.append(("Content-Length", String(request.method == .HEAD ? 0 : body?.count ?? 0)))
        try await outbound.write(.head(head(status, headers)))
        if let body, !body.isEmpty, request.method != .HEAD {
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
        }
        try await outbound.write(.end(nil))
        return true
    }

    func text(_ status: HTTPResponseStatus, _ body: String) async throws -> Bool {
        try await send(status, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Data(body.utf8))
    }

    func json(_ status: HTTPResponseStatus, _ object: [String: Any]) async throws -> Bool {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return try await send(status, headers: [("Content-Type", "application/json")], body: data)
    }
}
