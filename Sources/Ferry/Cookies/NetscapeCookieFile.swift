public import Foundation

/// The Netscape `cookies.txt` format that curl, wget, aria2, yt-dlp and browsers' cookie
/// exports read and write: one cookie a line, seven fields separated by tabs.
///
/// ```
/// # Netscape HTTP Cookie File
/// .example.com	TRUE	/	FALSE	1767225600	theme	dark
/// #HttpOnly_example.com	FALSE	/account	TRUE	0	session	a1b2c3
/// ```
///
/// The fields are: domain (a leading `.` for a domain cookie; `#HttpOnly_` before it for an
/// HttpOnly cookie), whether subdomains match (`TRUE`/`FALSE`), path, secure (`TRUE`/`FALSE`),
/// expiry in seconds since 1970 (`0` for a session cookie), name, value. Other lines that
/// start with `#`, and blank lines, are comments.
public enum NetscapeCookieFile {
    /// The first line of a file written by ``text(for:)``; readers look for it.
    static let header = "# Netscape HTTP Cookie File"

    /// The cookies in `text`; lines that are not cookies are skipped, as curl does, and
    /// cookies that have expired by `now` are left out.
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` when `text` has no cookie line and
    ///   does not start as a cookie file (so a file of another kind is not taken for an
    ///   empty jar).
    public static func cookies(in text: String, now: Date = Date()) throws(FerryError) -> [Cookie] {
        var cookies: [Cookie] = []
        var sawHeader = false
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            var line = Substring(rawLine)
            if line.hasPrefix(header) || line.hasPrefix("# HTTP Cookie File") { sawHeader = true }
            var httpOnly = false
            if line.hasPrefix("#HttpOnly_") {
                httpOnly = true
                line = line.dropFirst("#HttpOnly_".count)
            } else if line.hasPrefix("#") || line.allSatisfy(\.isWhitespace) {
                continue
            }
            guard let cookie = cookie(fromLine: line, httpOnly: httpOnly) else { continue }
            if !cookie.isExpired(at: now) { cookies.append(cookie) }
        }
        if cookies.isEmpty, !sawHeader, !text.allSatisfy(\.isWhitespace) {
            throw FerryError(.invalidRequest, "This is not a Netscape cookie file (cookies.txt).")
        }
        return cookies
    }

    /// One cookie line, or `nil` when it is not one.
    private static func cookie(fromLine line: Substring, httpOnly: Bool) -> Cookie? {
        let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
        // The value may be empty; some writers leave its tab off then.
        guard fields.count == 7 || fields.count == 6 else { return nil }
        var domain = String(fields[0]).trimmingCharacters(in: .whitespaces).lowercased()
        let tailMatch = fields[1].uppercased() == "TRUE"
        let path = String(fields[2])
        let secure = fields[3].uppercased() == "TRUE"
        guard let expiry = Int64(fields[4].trimmingCharacters(in: .whitespaces)), !fields[5].isEmpty else {
            return nil
        }
        let hostOnly = !tailMatch && !domain.hasPrefix(".")
        if domain.hasPrefix(".") { domain.removeFirst() }
        guard !domain.isEmpty, path.hasPrefix("/") else { return nil }
        return Cookie(
            name: String(fields[5]),
            value: fields.count == 7 ? String(fields[6]) : "",
            domain: domain,
            hostOnly: hostOnly,
            path: path,
            expires: expiry == 0 ? nil : Date(timeIntervalSince1970: TimeInterval(expiry)),
            secure: secure,
            httpOnly: httpOnly
        )
    }

    /// `cookies` as a Netscape cookie file, session cookies included (expiry `0`), as curl
    /// writes its jar.
    public static func text(for cookies: [Cookie]) -> String {
        var text = "\(header)\n# Written by Ferry; curl, wget and aria2 read this format.\n\n"
        for cookie in cookies {
            let domain = cookie.hostOnly ? cookie.domain : "." + cookie.domain
            let expiry = cookie.expires.map { String(Int64($0.timeIntervalSince1970.rounded(.up))) } ?? "0"
            let fields = [
                (cookie.httpOnly ? "#HttpOnly_" : "") + domain,
                cookie.hostOnly ? "FALSE" : "TRUE",
                cookie.path,
                cookie.secure ? "TRUE" : "FALSE",
                expiry,
                cookie.name,
                cookie.value,
            ]
            // A tab or line break inside a field would break the line apart: such a cookie
            // cannot be written in this format (Set-Cookie parsing never produces one).
            if fields.contains(where: { $0.contains { $0 == "\t" || $0.isNewline } }) { continue }
            text += fields.joined(separator: "\t") + "\n"
        }
        return text
    }
}

extension CookieStore {
    /// Adds the cookies of a Netscape `cookies.txt` file (curl's `-b FILE`, a browser's
    /// export), replacing any with the same name, domain and path.
    ///
    /// - Throws: ``FerryError/Reason/fileSystem`` when the file cannot be read,
    ///   ``FerryError/Reason/invalidRequest`` when it is not a cookie file.
    public func importNetscapeCookies(from file: URL) throws(FerryError) {
        let text: String
        do {
            text = try String(contentsOf: file, encoding: .utf8)
        } catch {
            throw FerryError(.fileSystem, "Cannot read the cookie file '\(file.path)'.", underlying: error)
        }
        for cookie in try NetscapeCookieFile.cookies(in: text) { set(cookie) }
    }

    /// Writes every cookie kept now, session cookies included, to `file` in Netscape format
    /// (curl's `-c FILE`): readable only by its owner (0600), through a temporary file and a
    /// rename.
    public func exportNetscapeCookies(to file: URL) throws(FerryError) {
        do {
            try FileSystem.writeAtomically(Data(NetscapeCookieFile.text(for: allCookies).utf8), to: file)
        } catch {
            throw error as? FerryError ?? FerryError(.fileSystem, "Cannot write '\(file.path)'.", underlying: error)
        }
    }
}
