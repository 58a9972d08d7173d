import Foundation
import Testing

@testable import Ferry

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// RFC 9111's rules as `CacheRules` applies them, without a server: what is stored, how
/// long it is fresh, how old it is, and how a stale one is asked about.
@Suite("CacheRules")
struct CacheRulesTests {
    let url = URL(string: "http://cache.example/resource")!
    let received = Date(timeIntervalSince1970: 1_700_000_000)

    func response(_ status: Int = 200, _ fields: [(String, String)]) -> HTTPResponse {
        HTTPResponse(url: url, statusCode: status, headers: HeaderFields(fields))
    }

    func request(_ fields: [String: String] = [:], method: String = "GET") -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in fields { request.setValue(value, forHTTPHeaderField: name) }
        return request
    }

    func cached(
        _ fields: [(String, String)],
        requested: [String: String] = [:],
        delay: TimeInterval = 0
    ) -> CachedResponse {
        CachedResponse(
            response: response(200, fields),
            body: Data("body".utf8),
            request: request(requested),
            requestTime: received.addingTimeInterval(-delay),
            responseTime: received
        )
    }

    @Test func directivesAreParsedCaseInsensitivelyWithQuotedValues() {
        let headers = HeaderFields([
            ("Cache-Control", "Max-Age=60, no-cache=\"Set-Cookie\""), ("cache-control", "public"),
        ])
        let directives = CacheRules.directives(headers)
        #expect(directives["max-age"] == "60")
        #expect(directives["no-cache"] == "Set-Cookie")
        #expect(directives["public"] == "")
    }

    @Test func onlyStorableResponsesAreStored() {
        let fresh = [("Cache-Control", "max-age=60")]
        #expect(CacheRules.isStorable(response(200, fresh), for: request()))
        #expect(CacheRules.isStorable(response(404, fresh), for: request()))
        #expect(!CacheRules.isStorable(response(200, fresh), for: request(method: "POST")))
        #expect(!CacheRules.isStorable(response(206, fresh), for: request()), "206 is not cacheable by default")
        #expect(!CacheRules.isStorable(response(200, [("Cache-Control", "max-age=60, no-store")]), for: request()))
        #expect(!CacheRules.isStorable(response(200, fresh), for: request(["Cache-Control": "no-store"])))
        #expect(!CacheRules.isStorable(response(200, fresh + [("Vary", "*")]), for: request()))
        #expect(
            !CacheRules.isStorable(response(200, []), for: request()),
            "nothing to judge freshness or validate with"
        )
        #expect(CacheRules.isStorable(response(200, [("ETag", "\"v1\"")]), for: request()))
    }

    /// §3.5: a response to a request with credentials is stored only when it says so.
    @Test func anAuthorizedResponseNeedsExplicitPermission() {
        let authorized = request(["Authorization": "Bearer t"])
        #expect(!CacheRules.isStorable(response(200, [("Cache-Control", "max-age=60")]), for: authorized))
        #expect(CacheRules.isStorable(response(200, [("Cache-Control", "max-age=60, public")]), for: authorized))
        #expect(
            CacheRules.isStorable(response(200, [("Cache-Control", "must-revalidate, max-age=0")]), for: authorized)
        )
    }

    @Test func maxAgeWinsOverExpires() {
        let entry = cached([("Cache-Control", "max-age=30"), ("Expires", "Thu, 01 Jan 2037 00:00:00 GMT")])
        #expect(CacheRules.freshnessLifetime(entry, date: received) == 30)
    }

    @Test func expiresCountsFromTheResponsesDateAndAnInvalidOneIsThePast() {
        let date = Date(timeIntervalSince1970: 1_000_000_000)  // Sun, 09 Sep 2001 01:46:40 GMT
        let entry = cached([("Expires", "Sun, 09 Sep 2001 01:48:20 GMT")])
        #expect(CacheRules.freshnessLifetime(entry, date: date) == 100)
        #expect(CacheRules.freshnessLifetime(cached([("Expires", "0")]), date: date) == 0)
        #expect(CacheRules.freshnessLifetime(cached([("ETag", "\"v\"")]), date: date) == 0, "no heuristic freshness")
    }

    /// §4.2.3: the age the server reported plus the response delay, plus the time resident.
    @Test func currentAgeAddsAgeDelayAndResidence() {
        let entry = cached([("Age", "10")], delay: 2)
        let age = CacheRules.currentAge(entry, date: received, now: received.addingTimeInterval(5))
        #expect(age == 17)
    }

    @Test func freshnessAgainstTheClockAndTheRequest() {
        let entry = cached([("Cache-Control", "max-age=60"), ("Date", "Tue, 14 Nov 2023 22:13:20 GMT")])
        #expect(CacheRules.isFresh(entry, for: request(), now: received.addingTimeInterval(30)))
        #expect(!CacheRules.isFresh(entry, for: request(), now: received.addingTimeInterval(61)))
        #expect(!CacheRules.isFresh(entry, for: request(["Cache-Control": "no-cache"]), now: received))
        #expect(!CacheRules.isFresh(entry, for: request(["Pragma": "no-cache"]), now: received))
        #expect(
            !CacheRules.isFresh(
                entry,
                for: request(["Cache-Control": "max-age=10"]),
                now: received.addingTimeInterval(20)
            )
        )
        let revalidated = cached([("Cache-Control", "max-age=60, no-cache")])
        #expect(!CacheRules.isFresh(revalidated, for: request(), now: received))
    }

    @Test func aStaleResponseIsAskedAboutByItsValidators() throws {
        let entry = cached([("ETag", "\"v2\""), ("Last-Modified", "Tue, 14 Nov 2023 22:00:00 GMT")])
        let conditional = try #require(CacheRules.conditionalRequest(request(), for: entry))
        #expect(conditional.value(forHTTPHeaderField: "If-None-Match") == "\"v2\"")
        #expect(conditional.value(forHTTPHeaderField: "If-Modified-Since") == "Tue, 14 Nov 2023 22:00:00 GMT")
        #expect(CacheRules.conditionalRequest(request(), for: cached([("Cache-Control", "max-age=1")])) == nil)
    }

    @Test func varyMatchesTheStoredRequestFields() {
        let entry = cached(
            [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language, accept")],
            requested: ["Accept-Language": "fr"]
        )
        #expect(CacheRules.varyNames(entry.response.headers) == ["accept-language", "accept"])
        #expect(CacheRules.variantMatches(entry, request(["Accept-Language": "fr"])))
        #expect(!CacheRules.variantMatches(entry, request(["Accept-Language": "de"])))
        #expect(!CacheRules.variantMatches(entry, request(["Accept-Language": "fr", "Accept": "text/html"])))
    }
}
