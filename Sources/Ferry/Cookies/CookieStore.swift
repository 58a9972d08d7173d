public import Foundation
import Synchronization

/// Cookies kept for a session, RFC 6265's storage model: what `HTTPCookieStorage` is to
/// URLSession.
///
/// A session with a store (``SessionConfiguration/cookieStore``) saves the cookies of every
/// response it receives (redirects and challenges included) and sends the matching ones with
/// every request, per hop, unless the request carries its own `Cookie` header. Matching is
/// RFC 6265's: host-only or domain cookies, path prefixes, `Secure` only over `https`,
/// expired ones dropped; a response may set cookies only for its own host or a domain that
/// contains it, and a `Secure` one only over `https`.
///
/// ```swift
/// configuration.cookieStore = try CookieStore(persistingTo: stateDirectory.appendingPathComponent("cookies.json"))
/// ```
///
/// ``shared`` is the process-wide store of ``SessionConfiguration/default``; an ephemeral
/// configuration gets a store of its own. A persistent store keeps cookies that have an
/// expiry in a JSON file readable only by its owner (session cookies are not saved, as
/// browsers do), written through a temporary file and a rename. Thread-safe.
public final class CookieStore: Sendable {
    /// The process-wide store.
    public static let shared = CookieStore()

    /// Most cookies kept; the least recently created go first beyond it.
    public static let capacity = 3000

    private let cookies: Mutex<[Cookie]>
    /// Where a persistent store saves itself; `nil` in memory.
    public let fileURL: URL?

    /// An empty store in memory.
    public init() {
        cookies = Mutex([])
        fileURL = nil
    }

    /// A store kept in `file`: loaded now if the file exists, saved after every change.
    ///
    /// - Throws: ``FerryError/Reason/fileSystem`` when the file exists but is not a store.
    public init(persistingTo file: URL) throws {
        fileURL = file
        var loaded: [Cookie] = []
        if FileManager.default.fileExists(atPath: file.path) {
            do {
                let decoder = JSONDecoder()
                decoder.dateDecodingStrategy = .secondsSince1970
                loaded = try decoder.decode([Cookie].self, from: Data(contentsOf: file))
            } catch {
                throw FerryError(.fileSystem, "\(file.path) is not a cookie store.", underlying: error)
            }
        }
        let now = Date()
        cookies = Mutex(loaded.filter { !$0.isExpired(at: now) })
    }

    /// Every cookie kept now, expired ones left out.
    public var allCookies: [Cookie] {
        let now = Date()
        return cookies.withLock { $0.filter { !$0.isExpired(at: now) } }
    }

    /// The cookies to send with a request to `url`, longest paths first, then oldest.
    public func cookies(for url: URL) -> [Cookie] {
        let now = Date()
        return cookies.withLock { $0.filter { $0.matches(url, at: now) } }
            .sorted { ($0.path.count, $1.created) > ($1.path.count, $0.created) }
    }

    /// Stores `cookie`, replacing one with the same name, domain and path (keeping its
    /// creation time); an expired cookie removes that one instead.
    public func set(_ cookie: Cookie) {
        let now = Date()
        // Saved under the lock, so that files are written in the order of the changes.
        cookies.withLock { cookies in
            var cookie = cookie
            if let index = cookies.firstIndex(where: {
                $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path
            }) {
                cookie.created = cookies[index].created
                cookies.remove(at: index)
            }
            if !cookie.isExpired(at: now) { cookies.append(cookie) }
            cookies.removeAll { $0.isExpired(at: now) }
            if cookies.count > Self.capacity {
                cookies.sort { $0.created < $1.created }
                cookies.removeFirst(cookies.count - Self.capacity)
            }
            save(cookies)
        }
    }

    /// Removes every cookie.
    public func removeAll() {
        cookies.withLock { cookies in
            cookies.removeAll()
            save(cookies)
        }
    }

    /// Stores what `Set-Cookie` fields of a response to `url` set; fields that are malformed
    /// or not the response's to set are ignored, as RFC 6265 says. A response over plain
    /// `http` may not set a cookie that would replace or shadow a `Secure` one (RFC 6265bis
    /// §5.7 step 16): the same name, for a domain either one covers, and a path within the
    /// secure cookie's.
    func store(setCookieFields fields: [String], from url: URL) {
        let now = Date()
        let secureOrigin = url.scheme?.lowercased() == "https"
        for field in fields {
            guard let cookie = SetCookieParser.cookie(from: field, for: url, now: now) else { continue }
            if !secureOrigin && !cookie.secure && shadowsSecureCookie(cookie) { continue }
            set(cookie)
        }
    }

    private func shadowsSecureCookie(_ cookie: Cookie) -> Bool {
        cookies.withLock { cookies in
            cookies.contains { kept in
                kept.secure && kept.name == cookie.name
                    && (Cookie.domain(kept.domain, matches: cookie.domain)
                        || Cookie.domain(cookie.domain, matches: kept.domain))
                    && Cookie.path(cookie.path, matches: kept.path)
            }
        }
    }

    /// The `Cookie` header value for a request to `url`, or `nil` when no cookie matches.
    func headerValue(for url: URL) -> String? {
        let matching = cookies(for: url)
        guard !matching.isEmpty else { return nil }
        return matching.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")
    }

    private func save(_ snapshot: [Cookie]) {
        guard let fileURL else { return }
        let persistent = snapshot.filter { $0.expires != nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        encoder.dateEncodingStrategy = .secondsSince1970
        // A cookie store that cannot be written loses cookies, never a transfer: ignore.
        guard let data = try? encoder.encode(persistent) else { return }
        try? FileSystem.createDirectory(fileURL.deletingLastPathComponent(), mode: 0o700)
        try? FileSystem.writeAtomically(data, to: fileURL)
    }
}
