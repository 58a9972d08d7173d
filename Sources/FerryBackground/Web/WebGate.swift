import Foundation

/// Decides what a request to the daemon's web interface may reach. A value: no I/O.
///
/// The web interface listens on a loopback TCP port, which every local user and every web
/// page the user visits can reach, so each request passes these checks in order:
/// 1. `Host` names the address the daemon listens on (a DNS-rebound name such as
///    `evil.example:PORT` resolving to 127.0.0.1 is refused);
/// 2. an `Origin` other than ours, or `Sec-Fetch-Site` saying another site, is refused on
///    every request, reads and changes alike (a browser sends `Origin` with every change;
///    curl and scripts send none, and need the token all the same);
/// 3. the page (`GET /?token=…`, or `GET /` with the ``cookieName`` cookie the page sets,
///    `HttpOnly` and `SameSite=Strict`, so that a reload works once the script has taken the
///    token out of the address bar), the API (`/v1/…` with `Authorization: Bearer …`) and
///    the metrics (`GET /metrics`, Prometheus's text format, with the same `Authorization`,
///    which Prometheus sends with `authorization: { credentials: TOKEN }`) need the token
///    the daemon made at start, compared in constant time. The page itself
///    holds no secret: its script keeps the token in the tab's session storage.
/// No CORS header is ever sent, so a preflight (`OPTIONS`) is refused as well.
struct WebGate: Sendable, Equatable {
    /// What the server does with a request.
    enum Decision: Sendable, Equatable {
        /// Serve the page.
        case page
        /// Hand the request to the socket API's router, as if it came through the socket.
        case api
        /// Answer with the daemon's metrics.
        case metrics
        /// Answer with this status and error code, and a message saying why.
        case refuse(status: Int, code: String, message: String)
    }

    /// The cookie that lets the page be fetched again without the token in its address.
    static let cookieName = "ferry-web-token"

    /// The random token (URL-safe characters only).
    let token: String

    /// `Set-Cookie` for the page's answer.
    var pageCookie: String { "\(Self.cookieName)=\(token); HttpOnly; SameSite=Strict; Path=/" }
    /// `host:port` forms a browser may send in `Host` for the bound address, lowercased.
    let authorities: Set<String>

    /// - Parameters:
    ///   - token: the secret the page and the API require.
    ///   - host: the loopback address listened on (`127.0.0.1`, `::1`, `localhost`).
    ///   - port: the port listened on.
    init(token: String, host: String, port: Int) {
        self.token = token
        var names = [host.lowercased()]
        if host == "127.0.0.1" || host == "::1" || host.lowercased() == "localhost" { names.append("localhost") }
        authorities = Set(
            names.map { name in name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)" }
        )
    }

    /// The origins our own page sends.
    var origins: Set<String> { Set(authorities.map { "http://\($0)" }) }

    /// Decides on one request.
    /// - Parameters:
    ///   - method: the request's method.
    ///   - target: the request target (path and query).
    ///   - headers: the request's header fields (names in any case).
    func decide(method: String, target: String, headers: [(name: String, value: String)]) -> Decision {
        func values(_ name: String) -> [String] {
            headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
        }
        let hosts = values("Host")
        guard hosts.count == 1, authorities.contains(hosts[0].lowercased()) else {
            return .refuse(
                status: 403,
                code: "foreignHost",
                message: "This interface answers only to \(authorities.sorted().joined(separator: " or "))."
            )
        }
        let origins = values("Origin")
        guard origins.count <= 1, origins.allSatisfy(self.origins.contains),
            values("Sec-Fetch-Site").allSatisfy({ $0 != "cross-site" && $0 != "same-site" })
        else {
            return .refuse(status: 403, code: "foreignOrigin", message: "Requests from other sites are refused.")
        }
        if method == "OPTIONS" {
            return .refuse(status: 403, code: "foreignOrigin", message: "No cross-origin requests.")
        }
        let components = URLComponents(string: target)
        let path = components?.path ?? ""
        if path == "/" || path.isEmpty {
            guard method == "GET" || method == "HEAD" else {
                return .refuse(status: 405, code: "methodNotAllowed", message: "\(method) is not allowed on /.")
            }
            let cookies = values("Cookie").flatMap { $0.split(separator: ";") }.compactMap { pair -> String? in
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == Self.cookieName else {
                    return nil
                }
                return String(parts[1]).trimmingCharacters(in: .whitespaces)
            }
            let given = components?.queryItems?.first { $0.name == "token" }?.value
            guard (given.map { Self.same($0, token) } ?? false) || cookies.contains(where: { Self.same($0, token) })
            else {
                return .refuse(
                    status: 401,
                    code: "unauthorized",
                    message: "Open the address `ferry web` prints: it carries the token."
                )
            }
            return .page
        }
        let metrics = path == "/metrics"
        guard path.hasPrefix("/v1/") || metrics else {
            return .refuse(status: 404, code: "notFound", message: "No such page: \(path).")
        }
        let authorization = values("Authorization")
        guard authorization.count == 1, authorization[0].hasPrefix("Bearer "),
            Self.same(String(authorization[0].dropFirst("Bearer ".count)), token)
        else {
            return .refuse(
                status: 401,
                code: "unauthorized",
                message:
                    "The \(metrics ? "metrics need" : "API needs") the daemon's token: Authorization: Bearer TOKEN."
            )
        }
        guard metrics else { return .api }
        guard method == "GET" || method == "HEAD" else {
            return .refuse(status: 405, code: "methodNotAllowed", message: "\(method) is not allowed on /metrics.")
        }
        return .metrics
    }

    /// Whether `given` equals `expected`, in time that depends only on their lengths.
    static func same(_ given: String, _ expected: String) -> Bool {
        let a = Array(given.utf8)
        let b = Array(expected.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
