import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The parts of RFC 9111 a private client cache needs, without I/O: what may be stored,
/// how long it is fresh, how old it is, and how to ask whether it changed.
enum CacheRules {
    /// `Cache-Control` directives, names lowercased; a value-less directive maps to "".
    static func directives(_ headers: HeaderFields) -> [String: String] {
        var result: [String: String] = [:]
        for field in headers.values(for: "Cache-Control") {
            for item in field.split(separator: ",") {
                let parts = item.split(separator: "=", maxSplits: 1)
                guard let name = parts.first.map({ String($0).trimmingWhitespace().lowercased() }), !name.isEmpty
                else { continue }
                var value = parts.count == 2 ? String(parts[1]).trimmingWhitespace() : ""
                if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 {
                    value = String(value.dropFirst().dropLast())
                }
                result[name] = value
            }
        }
        return result
    }

    static func varyNames(_ headers: HeaderFields) -> [String] {
        headers.values(for: "Vary").flatMap { $0.split(separator: ",") }
            .map { String($0).trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
    }

    /// Statuses cacheable by default (RFC 9110 §15.1).
    static let cacheableStatuses: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Whether a response to `request` may be stored (RFC 9111 §3): a GET, a cacheable
    /// status, no `no-store` on either side, no `Vary: *`, something to judge freshness or
    /// validate with, and, for a request with `Authorization`, the response's explicit
    /// permission (§3.5).
    static func isStorable(_ response: HTTPResponse, for request: URLRequest) -> Bool {
        guard request.httpMethod?.uppercased() ?? "GET" == "GET", cacheableStatuses.contains(response.statusCode)
        else { return false }
        let responseDirectives = directives(response.headers)
        let requestDirectives = directives(of: request)
        if responseDirectives["no-store"] != nil || requestDirectives["no-store"] != nil { return false }
        if varyNames(response.headers).contains("*") { return false }
        if request.value(forHTTPHeaderField: "Authorization") != nil,
            responseDirectives["public"] == nil, responseDirectives["must-revalidate"] == nil,
            responseDirectives["s-maxage"] == nil
        {
            return false
        }
        let hasFreshness = responseDirectives["max-age"] != nil || response.headers["Expires"] != nil
        let hasValidator = response.headers["ETag"] != nil || response.headers["Last-Modified"] != nil
        return hasFreshness || hasValidator || responseDirectives["public"] != nil
    }

    /// The `Cache-Control` directives of `request`'s own header fields.
    private static func directives(of request: URLRequest) -> [String: String] {
        directives(HeaderFields((request.allHTTPHeaderFields ?? [:]).map { (name: $0.key, value: $0.value) }))
    }

    /// How long the response is fresh (§4.2.1): `max-age`, else `Expires` − `date` (its `Date`
    /// header); no heuristic freshness (a response without either is revalidated every time).
    static func freshnessLifetime(_ cached: CachedResponse, date: Date) -> TimeInterval {
        let headers = cached.response.headers
        if let maxAge = directives(headers)["max-age"], let seconds = Int(maxAge) {
            return TimeInterval(max(0, seconds))
        }
        guard let expires = headers["Expires"] else { return 0 }
        guard let expiry = HTTPDate.parse(expires) else { return 0 }  // an invalid date is the past (§5.3)
        return max(0, expiry.timeIntervalSince(date))
    }

    /// The response's current age (§4.2.3); `date` is its `Date` header.
    static func currentAge(_ cached: CachedResponse, date: Date, now: Date) -> TimeInterval {
        let headers = cached.response.headers
        let apparentAge = max(0, cached.responseTime.timeIntervalSince(date))
        let ageValue = headers["Age"].flatMap { TimeInterval($0.trimmingWhitespace()) } ?? 0
        let responseDelay = cached.responseTime.timeIntervalSince(cached.requestTime)
        let correctedInitialAge = max(apparentAge, ageValue + responseDelay)
        return correctedInitialAge + now.timeIntervalSince(cached.responseTime)
    }

    /// Whether `cached` may answer `request` without asking the server.
    static func isFresh(_ cached: CachedResponse, for request: URLRequest, now: Date) -> Bool {
        let requestDirectives = directives(of: request)
        if requestDirectives["no-cache"] != nil
            || request.value(forHTTPHeaderField: "Pragma")?.lowercased() == "no-cache"
        {
            return false
        }
        if directives(cached.response.headers)["no-cache"] != nil { return false }
        // The response's Date, parsed once for both lifetime and age; without one, when it
        // was received.
        let date = cached.response.headers["Date"].flatMap { HTTPDate.parse($0) } ?? cached.responseTime
        var lifetime = freshnessLifetime(cached, date: date)
        if let maxAge = requestDirectives["max-age"].flatMap(Int.init) {
            lifetime = min(lifetime, TimeInterval(maxAge))
        }
        return currentAge(cached, date: date, now: now) < lifetime
    }

    /// `request` made conditional on `cached` (§4.3.1): `If-None-Match` with its entity tag,
    /// `If-Modified-Since` with its `Last-Modified`; `nil` when it has neither.
    static func conditionalRequest(_ request: URLRequest, for cached: CachedResponse) -> URLRequest? {
        let headers = cached.response.headers
        var conditional = request
        if let tag = headers["ETag"] { conditional.setValue(tag, forHTTPHeaderField: "If-None-Match") }
        if let modified = headers["Last-Modified"] {
            conditional.setValue(modified, forHTTPHeaderField: "If-Modified-Since")
        }
        return headers["ETag"] == nil && headers["Last-Modified"] == nil ? nil : conditional
    }

    /// Whether `cached` answers `request` as far as `Vary` is concerned (§4.1).
    static func variantMatches(_ cached: CachedResponse, _ request: URLRequest) -> Bool {
        cached.varyingRequestFields.allSatisfy { request.value(forHTTPHeaderField: $0.key) ?? "" == $0.value }
    }
}
