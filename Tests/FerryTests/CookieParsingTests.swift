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
        #expect(!Cookie.domain("10.1", matches: "1"), "an address in inet_aton's short form")
        #expect(Cookie.domain("a.10.example", matches: "10.example"))
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

    /// Security review 10: a `Domain` that is a public suffix (`co.uk`, `github.io`, a
    /// wildcard's match) is refused unless it is the host itself (then the cookie is
    /// host-only), by the system's list (Debian's `publicsuffix`).
    @Test("13.10: a Domain that is a public suffix is refused")
    func publicSuffixDomainsAreRefused() throws {
        func cookie(_ field: String, _ page: String) throws -> Cookie? {
            SetCookieParser.cookie(from: field, for: try url(page), now: now)
        }
        #expect(try cookie("a=1; Domain=co.uk", "https://a.co.uk/") == nil)
        #expect(try cookie("a=1; Domain=.CO.UK", "https://a.co.uk/") == nil)
        #expect(try cookie("a=1; Domain=com.au", "http://shop.com.au/") == nil)
        #expect(try cookie("a=1; Domain=github.io", "https://me.github.io/") == nil)
        #expect(try cookie("a=1; Domain=anything.ck", "https://www.anything.ck/") == nil)
        let own = try #require(try cookie("a=1; Domain=a.co.uk", "https://x.a.co.uk/"))
        #expect(own.domain == "a.co.uk" && !own.hostOnly)
        // A host that is itself a suffix may set a host-only cookie (RFC 6265 §5.3 step 5).
        let hostOnly = try #require(try cookie("a=1; Domain=github.io", "https://github.io/"))
        #expect(hostOnly.hostOnly && hostOnly.domain == "github.io")
    }

    /// The public suffix list's rules (normal, wildcard, exception), and the rules used
    /// when the system has no list, which still catch the common second-level suffixes.
    @Test func publicSuffixListRules() throws {
        let system = try #require(PublicSuffixList.system, "the publicsuffix package is not installed")
        #expect(system.isPublicSuffix("github.io") && system.isPublicSuffix("com"))
        #expect(system.isPublicSuffix("anything.ck") && !system.isPublicSuffix("www.ck"))
        #expect(!system.isPublicSuffix("example.com") && !system.isPublicSuffix("a.co.uk"))
        let small = PublicSuffixList(rules: "// comment\nuk\nco.uk\n*.kawasaki.jp\n!city.kawasaki.jp\n")
        #expect(small.isPublicSuffix("co.uk") && small.isPublicSuffix("uk") && !small.isPublicSuffix("a.co.uk"))
        #expect(small.isPublicSuffix("x.kawasaki.jp") && !small.isPublicSuffix("city.kawasaki.jp"))
        let fallback = PublicSuffixList.fallback
        for suffix in ["co.uk", "com.au", "ac.jp", "uk", "com"] {
            #expect(fallback.isPublicSuffix(suffix), "\(suffix)")
        }
        for domain in ["example.com", "a.co.uk", "bbc.co.uk"] { #expect(!fallback.isPublicSuffix(domain), "\(domain)") }
        let page = try url("https://a.co.uk/")
        #expect(SetCookieParser.cookie(from: "a=1; Domain=co.uk", for: page, now: now, suffixes: fallback) == nil)
    }

    /// Security review 10: a response over plain http cannot set a cookie that would
    /// replace (shadow) a `Secure` one of the same name for that domain and path (RFC 6265bis
    /// §5.7 step 16); over https it can.
    @Test("13.10: plain http cannot replace a Secure cookie")
    func plainHTTPCannotReplaceASecureCookie() throws {
        let store = CookieStore()
        store.store(setCookieFields: ["s=1; Secure; Path=/", "t=1; Path=/"], from: try url("https://example.com/"))
        store.store(setCookieFields: ["s=2; Path=/", "t=2; Path=/"], from: try url("http://example.com/"))
        store.store(setCookieFields: ["s=3; Domain=example.com; Path=/a"], from: try url("http://www.example.com/"))
        let kept = store.allCookies.map { "\($0.name)=\($0.value)" }.sorted()
        #expect(kept == ["s=1", "t=2"])
        store.store(setCookieFields: ["s=4; Path=/"], from: try url("https://example.com/"))
        #expect(store.allCookies.map { "\($0.name)=\($0.value)" }.sorted() == ["s=4", "t=2"])
    }
}
