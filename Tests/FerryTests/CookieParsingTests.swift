import Foundation
import Testing

@testable import Ferry

@Suite("RFC 6265 cookie rules")
struct CookieParsingTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func url(_ string: String) throws -> URL { try #require(URL(string: string)) }

    @Test func domainAndHostOnly() throws {
        let page = try url("https://www.example.com/")
        let host = try #require(SetCookieParser.cookie(from: "a=1", for: page, now: now))
        #expect(host.hostOnly && host.domain == "www.example.com")
        #expect(host.matches(try url("https://www.example.com/"), at: now))
        #expect(!host.matches(try url("https://sub.www.example.com/"), at: now))
        let domain = try #require(SetCookieParser.cookie(from: "a=1; Domain=.Example.com", for: page, now: now))
        #expect(!domain.hostOnly && domain.domain == "example.com")
        #expect(domain.matches(try url("https://other.example.com/"), at: now))
        #expect(!domain.matches(try url("https://badexample.com/"), at: now))
        #expect(SetCookieParser.cookie(from: "a=1; Domain=other.com", for: page, now: now) == nil)
        #expect(SetCookieParser.cookie(from: "a=1; Domain=com", for: page, now: now) == nil)
        // An IP address only ever matches itself.
        #expect(!Cookie.domain("10.0.0.1", matches: "0.0.1"))
    }

    @Test func pathsAndDefaults() throws {
        #expect(Cookie.defaultPath(of: try url("http://h/a/b/c")) == "/a/b")
        #expect(Cookie.defaultPath(of: try url("http://h/a")) == "/")
        #expect(Cookie.defaultPath(of: try url("http://h")) == "/")
        #expect(Cookie.path("/docs/web", matches: "/docs"))
        #expect(Cookie.path("/docs", matches: "/docs"))
        #expect(Cookie.path("/docs/", matches: "/docs/"))
        #expect(!Cookie.path("/docsets", matches: "/docs"))
        let ignored = try #require(
            SetCookieParser.cookie(from: "a=1; Path=relative", for: try url("http://h/x/y"), now: now)
        )
        #expect(ignored.path == "/x")
    }

    @Test func expiryMaxAgeWinsAndDatesParseLikeBrowsers() throws {
        let page = try url("http://h/")
        let both = try #require(
            SetCookieParser.cookie(from: "a=1; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Max-Age=60", for: page, now: now)
        )
        #expect(both.expires == now.addingTimeInterval(60))
        #expect(CookieDate.parse("Wed, 21 Oct 2015 07:28:00 GMT") == Date(timeIntervalSince1970: 1_445_412_480))
        #expect(CookieDate.parse("Wednesday, 21-Oct-15 07:28:00 GMT") == Date(timeIntervalSince1970: 1_445_412_480))
        #expect(CookieDate.parse("Wed Oct 21 07:28:00 2015") == Date(timeIntervalSince1970: 1_445_412_480))
        #expect(CookieDate.parse("21 Oct 2015") == nil)
        #expect(CookieDate.parse("Wed, 32 Oct 2015 07:28:00 GMT") == nil)
        let gone = try #require(SetCookieParser.cookie(from: "a=1; Max-Age=-5", for: page, now: now))
        #expect(gone.isExpired(at: now))
        let capped = try #require(SetCookieParser.cookie(from: "a=1; Max-Age=999999999", for: page, now: now))
        #expect(capped.expires == now.addingTimeInterval(400 * 86_400))
    }

    @Test func secureOnlyFromAndToHTTPS() throws {
        #expect(SetCookieParser.cookie(from: "a=1; Secure", for: try url("http://h/"), now: now) == nil)
        let secure = try #require(
            SetCookieParser.cookie(from: "a=1; Secure; SameSite=Strict", for: try url("https://h/"), now: now)
        )
        #expect(secure.sameSite == "Strict")
        #expect(secure.matches(try url("https://h/"), at: now))
        #expect(!secure.matches(try url("http://h/"), at: now))
    }
}
