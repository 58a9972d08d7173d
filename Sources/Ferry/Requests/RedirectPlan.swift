import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request a redirect asks for, worked out without I/O (RFC 9110 §15.4).
///
/// - 301 / 302 turn `POST` into `GET` (as every browser and URLSession do) and drop the body;
/// - 303 turns anything but `HEAD` into `GET` and drops the body;
/// - 307 / 308 keep method and body; a body that cannot be produced again fails the redirect.
///
/// Credentials (`Authorization`, `Proxy-Authorization`, `Cookie`) are not carried to another
/// origin.
enum RedirectPlan: Equatable {
    /// The response is not a redirect Ferry follows (no `Location`, or 300 / 304 / 305).
    case notARedirect
    /// The proposed next request, and whether it still carries the original body.
    case follow(URLRequest, keepsBody: Bool)
    /// The redirect cannot be followed.
    case fail(FerryError)

    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]
    static let credentialHeaders = HeaderFields.credentialNames
    static let bodyHeaders = ["Content-Type", "Content-Length", "Content-Encoding", "Transfer-Encoding"]

    /// `request` sent to `url` instead, as a redirect would carry it there: without its
    /// credential fields when `url` is another origin. (A download's later attempts go
    /// straight to the hop that answered.)
    static func request(_ request: URLRequest, pointedAt url: URL) -> URLRequest {
        // Most responses come from where they were asked for (and a change copies).
        if request.url == url { return request }
        var moved = request
        moved.url = url
        if let original = request.url, Origin(original) != Origin(url) {
            for field in credentialHeaders { moved.setValue(nil, forHTTPHeaderField: field) }
        }
        return moved
    }

    static func make(
        for request: URLRequest,
        response: HTTPResponse,
        bodyIsReplayable: Bool,
        hasBody: Bool,
        allowsInsecure: Bool = false
    ) -> RedirectPlan {
        guard redirectStatuses.contains(response.statusCode),
            let location = response.headers["Location"]?.trimmingWhitespace(), !location.isEmpty
        else { return .notARedirect }
        guard let base = request.url,
            let target = URL(string: location, relativeTo: base)?.absoluteURL,
            let scheme = target.scheme?.lowercased(), scheme == "http" || scheme == "https",
            target.host?.isEmpty == false
        else {
            return .fail(
                FerryError(
                    .redirectFailed,
                    "The server redirected to '\(location)', which is not an http(s) URL.",
                    response: response
                )
            )
        }
        if base.scheme?.lowercased() == "https", scheme == "http", !allowsInsecure {
            return .fail(
                FerryError(
                    .redirectFailed,
                    "The server redirected from https to '\(target.absoluteString)', which is not encrypted; set allowsInsecureRedirects to follow it.",
                    response: response
                )
            )
        }
        var next = request
        next.url = target
        let method = request.method
        var keepsBody = hasBody
        switch response.statusCode {
        case 301 where method == .post, 302 where method == .post:
            next.method = .get
            keepsBody = false
        case 303 where method != .head:
            next.method = .get
            keepsBody = false
        default:
            break
        }
        if !keepsBody {
            next.httpBody = nil
            for name in bodyHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        } else if !bodyIsReplayable {
            return .fail(
                FerryError(
                    .bodyNotReplayable,
                    "The server answered \(response.statusCode), which asks to send the body again, but the body is a one-shot stream.",
                    response: response
                )
            )
        }
        if Origin(base) != Origin(target) {
            for name in credentialHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        return .follow(next, keepsBody: keepsBody)
    }
}

/// Scheme, host and port: the origin of RFC 6454, used to decide what may follow a redirect.
struct Origin: Hashable, Sendable, CustomStringConvertible {
    var scheme: String
    var host: String
    var port: Int

    init(_ url: URL) {
        scheme = url.scheme?.lowercased() ?? ""
        host = url.host?.lowercased() ?? ""
        port = url.port ?? (scheme == "https" ? 443 : 80)
    }

    var description: String { "\(scheme)://\(host):\(port)" }
}
