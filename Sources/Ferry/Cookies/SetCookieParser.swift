import Foundation

/// Reads one `Set-Cookie` field into a ``Cookie`` (RFC 6265 §5.2), or refuses it (§5.3).
enum SetCookieParser {
    /// The cookie `field` sets for a response to `url`, or `nil` when the field is malformed
    /// or the cookie is not the response's to set (a `Domain` the host is not in, a `Secure`
    /// cookie from plain `http`, a `Domain` that is a public suffix of `suffixes`).
    static func cookie(
        from field: String,
        for url: URL,
        now: Date = Date(),
        suffixes: PublicSuffixList = .current
    ) -> Cookie? {
        guard let host = url.host?.lowercased(), !host.isEmpty else { return nil }
        let parts = field.split(separator: ";", omittingEmptySubsequences: false)
        guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return nil }
        let name = pair[..<equals].trimmingWhitespace()
        let value = pair[pair.index(after: equals)...].trimmingWhitespace()
        guard !name.isEmpty, name.count + value.count <= 4096 else { return nil }
        var cookie = Cookie(name: name, value: value, domain: host, path: Cookie.defaultPath(of: url), created: now)
        var maxAge: Date?
        var expires: Date?
        for attribute in parts.dropFirst() {
            let (key, attributeValue): (String, String)
            if let equals = attribute.firstIndex(of: "=") {
                key = attribute[..<equals].trimmingWhitespace().lowercased()
                attributeValue = attribute[attribute.index(after: equals)...].trimmingWhitespace()
            } else {
                key = attribute.trimmingWhitespace().lowercased()
                attributeValue = ""
            }
            switch key {
            case "expires":
                if let date = CookieDate.parse(attributeValue) { expires = date }
            case "max-age":
                guard let first = attributeValue.first, first == "-" || first.isNumber,
                    attributeValue.dropFirst().allSatisfy(\.isNumber)
                else { break }
                let seconds = Int64(attributeValue) ?? (first == "-" ? Int64.min : Int64.max)
                maxAge = seconds <= 0 ? .distantPast : now.addingTimeInterval(Double(min(seconds, 400 * 86_400)))
            case "domain":
                var domain = attributeValue.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                guard !domain.isEmpty else { break }
                // A cookie for a domain the host is not in, or for a bare top-level name,
                // is not this response's to set.
                guard Cookie.domain(host, matches: domain), domain.contains(".") || domain == host else {
                    return nil
                }
                // A public suffix (`co.uk`) would reach every site beneath it: refused,
                // unless it is the host itself, which then gets a host-only cookie (RFC
                // 6265 §5.3 step 5).
                if suffixes.isPublicSuffix(domain) {
                    guard domain == host else { return nil }
                    break
                }
                cookie.domain = domain
                cookie.hostOnly = false
            case "path":
                if attributeValue.hasPrefix("/") { cookie.path = attributeValue }
            case "secure":
                cookie.secure = true
            case "httponly":
                cookie.httpOnly = true
            case "samesite":
                cookie.sameSite = attributeValue
            default:
                break
            }
        }
        // Max-Age wins over Expires (§5.3 step 3); browsers cap lifetimes at 400 days.
        cookie.expires = maxAge ?? expires.map { min($0, now.addingTimeInterval(400 * 86_400)) }
        // RFC 6265bis: only a secure origin sets a Secure cookie.
        if cookie.secure && url.scheme?.lowercased() != "https" { return nil }
        return cookie
    }
}

/// RFC 6265 §5.1.1's cookie-date: the forgiving parse browsers use for `Expires`.
enum CookieDate {
    static func parse(_ text: String) -> Date? {
        let delimiters = Set<Character>("\t !\"#$%&'()*+,-./;<=>?@[\\]^_`{|}~")
        let tokens = text.split { delimiters.contains($0) }.map(String.init)
        var time: (Int, Int, Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        for token in tokens {
            if time == nil, let parsed = parseTime(token) {
                time = parsed
            } else if day == nil, let value = leadingDigits(token, 1...2) {
                day = value
            } else if month == nil,
                let index = CivilTime.monthAbbreviations.firstIndex(of: String(token.prefix(3)).lowercased())
            {
                month = index + 1
            } else if year == nil, let value = leadingDigits(token, 2...4) {
                year = value
            }
        }
        guard let (hour, minute, second) = time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 }
        if (0...69).contains(year) { year += 2000 }
        guard year >= 1601 else { return nil }
        // §5.1.1 step 5 fails a day of 32 or an hour of 24; a day past the month's end is
        // not a date either.
        return CivilTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
            .flatMap { $0.second <= 59 ? $0.date : nil }
    }

    private static func parseTime(_ token: String) -> (Int, Int, Int)? {
        let pieces = token.split(separator: ":", omittingEmptySubsequences: false)
        guard pieces.count == 3 else { return nil }
        let numbers = pieces.compactMap { piece -> Int? in
            let digits = piece.prefix { $0.isNumber }
            guard (1...2).contains(digits.count) else { return nil }
            return Int(digits)
        }
        return numbers.count == 3 ? (numbers[0], numbers[1], numbers[2]) : nil
    }

    private static func leadingDigits(_ token: String, _ count: ClosedRange<Int>) -> Int? {
        let digits = token.prefix { $0.isASCII && $0.isNumber }
        // "1*2DIGIT ( non-digit *OCTET )": the digits end at the first non-digit.
        guard count.contains(digits.count) else { return nil }
        return Int(digits)
    }
}

extension Substring {
    fileprivate func trimmingWhitespace() -> String { String(self).trimmingWhitespace() }
}
