import Testing

@testable import FerryBackground

@Suite("WebGate and WebAddress: who the daemon's web page answers")
struct WebGateTests {
    let gate = WebGate(token: "s3cret-token", host: "127.0.0.1", port: 6801)
    let bearer = (name: "Authorization", value: "Bearer s3cret-token")

    func decide(
        _ method: String,
        _ target: String,
        _ headers: [(name: String, value: String)]
    ) -> WebGate.Decision {
        gate.decide(method: method, target: target, headers: headers)
    }

    func refusal(_ decision: WebGate.Decision) -> (Int, String)? {
        if case .refuse(let status, let code, _) = decision { return (status, code) }
        return nil
    }

    @Test func thePageNeedsItsTokenInTheAddress() {
        let host = (name: "Host", value: "127.0.0.1:6801")
        #expect(decide("GET", "/?token=s3cret-token", [host]) == .page)
        #expect(decide("HEAD", "/?token=s3cret-token", [host]) == .page)
        #expect(refusal(decide("GET", "/", [host]))! == (401, "unauthorized"))
        #expect(refusal(decide("GET", "/?token=s3cret-tokeN", [host]))! == (401, "unauthorized"))
        #expect(refusal(decide("GET", "/?token=s3cret-token-longer", [host]))! == (401, "unauthorized"))
        #expect(refusal(decide("POST", "/?token=s3cret-token", [host]))! == (405, "methodNotAllowed"))
        #expect(refusal(decide("GET", "/favicon.ico", [host]))! == (404, "notFound"))
    }

    /// After the script took the token out of the address bar, a reload brings the page's
    /// cookie; the cookie never opens the API.
    @Test func aReloadOfThePageMayCarryItsCookieInstead() {
        let host = (name: "Host", value: "127.0.0.1:6801")
        #expect(gate.pageCookie == "ferry-web-token=s3cret-token; HttpOnly; SameSite=Strict; Path=/")
        #expect(decide("GET", "/", [host, (name: "Cookie", value: "a=b; ferry-web-token=s3cret-token")]) == .page)
        #expect(
            refusal(decide("GET", "/", [host, (name: "Cookie", value: "ferry-web-token=wrong")]))! == (
                401, "unauthorized"
            )
        )
        #expect(
            refusal(decide("GET", "/", [host, (name: "Cookie", value: "other=s3cret-token")]))! == (401, "unauthorized")
        )
        let cookie = (name: "Cookie", value: "ferry-web-token=s3cret-token")
        #expect(refusal(decide("GET", "/v1/tasks", [host, cookie]))! == (401, "unauthorized"))
    }

    @Test func theAPINeedsTheTokenAsABearer() {
        let host = (name: "Host", value: "127.0.0.1:6801")
        #expect(decide("GET", "/v1/tasks", [host, bearer]) == .api)
        #expect(decide("POST", "/v1/tasks/3/pause", [host, bearer]) == .api)
        #expect(decide("GET", "/v1/tasks", [host, (name: "authorization", value: "Bearer s3cret-token")]) == .api)
        #expect(refusal(decide("GET", "/v1/tasks", [host]))! == (401, "unauthorized"))
        #expect(refusal(decide("GET", "/v1/tasks?token=s3cret-token", [host]))! == (401, "unauthorized"))
        #expect(
            refusal(decide("GET", "/v1/tasks", [host, (name: "Authorization", value: "Basic czNjcmV0")]))! == (
                401, "unauthorized"
            )
        )
        #expect(refusal(decide("GET", "/v1/tasks", [host, bearer, bearer]))! == (401, "unauthorized"))
    }

    @Test func hostMustNameTheBoundAddress() {
        #expect(decide("GET", "/v1/tasks", [(name: "Host", value: "localhost:6801"), bearer]) == .api)
        #expect(decide("GET", "/v1/tasks", [(name: "host", value: "LOCALHOST:6801"), bearer]) == .api)
        for host in ["attacker.example:6801", "127.0.0.1:80", "127.0.0.1", "127.0.0.2:6801", ""] {
            #expect(
                refusal(decide("GET", "/v1/tasks", [(name: "Host", value: host), bearer]))! == (403, "foreignHost")
            )
        }
        #expect(refusal(decide("GET", "/v1/tasks", [bearer]))! == (403, "foreignHost"))
        let two = [(name: "Host", value: "127.0.0.1:6801"), (name: "Host", value: "attacker.example"), bearer]
        #expect(refusal(decide("GET", "/v1/tasks", two))! == (403, "foreignHost"))
        let ipv6 = WebGate(token: "t", host: "::1", port: 80)
        #expect(ipv6.authorities == ["[::1]:80", "localhost:80"])
    }

    @Test func anotherSitesOriginIsRefusedForReadsAndChanges() {
        let host = (name: "Host", value: "127.0.0.1:6801")
        for method in ["GET", "POST"] {
            let own = [host, bearer, (name: "Origin", value: "http://127.0.0.1:6801")]
            #expect(decide(method, "/v1/tasks", own) == .api)
            let foreign = [host, bearer, (name: "Origin", value: "http://attacker.example")]
            #expect(refusal(decide(method, "/v1/tasks", foreign))! == (403, "foreignOrigin"))
            let null = [host, bearer, (name: "Origin", value: "null")]
            #expect(refusal(decide(method, "/v1/tasks", null))! == (403, "foreignOrigin"))
            let https = [host, bearer, (name: "Origin", value: "https://127.0.0.1:6801")]
            #expect(refusal(decide(method, "/v1/tasks", https))! == (403, "foreignOrigin"))
            let crossSite = [host, bearer, (name: "Sec-Fetch-Site", value: "cross-site")]
            #expect(refusal(decide(method, "/v1/tasks", crossSite))! == (403, "foreignOrigin"))
        }
        // Our own page's fetches say same-origin; a script sends no Origin at all.
        #expect(decide("POST", "/v1/clean", [host, bearer, (name: "Sec-Fetch-Site", value: "same-origin")]) == .api)
        #expect(decide("POST", "/v1/clean", [host, bearer]) == .api)
        // No CORS: a preflight is refused.
        #expect(refusal(decide("OPTIONS", "/v1/tasks", [host, bearer]))! == (403, "foreignOrigin"))
    }

    @Test func addressesParseAndOnlyLoopbackPasses() {
        #expect(WebAddress.parse("127.0.0.1:6801")! == ("127.0.0.1", 6801))
        #expect(WebAddress.parse("127.1.2.3:0")! == ("127.1.2.3", 0))
        #expect(WebAddress.parse("localhost:80")! == ("localhost", 80))
        #expect(WebAddress.parse("[::1]:6801")! == ("::1", 6801))
        #expect(WebAddress.parse("6801")! == ("127.0.0.1", 6801))
        for text in [
            "0.0.0.0:6801", "[::]:6801", "192.168.1.2:80", "example.com:80", "128.0.0.1:1", "127.0.0.1:65536",
            "127.0.0.1:-1", "127.0.0.1:", "127.0.0:80", "127.0.0.1.5:80", "[::1]6801", "::1:80", "127.0.0.1:80x",
        ] {
            #expect(WebAddress.parse(text) == nil, "\(text)")
        }
        #expect(WebAddress.url(host: "::1", port: 9) == "http://[::1]:9/")
        #expect(WebAddress.url(host: "127.0.0.1", port: 9) == "http://127.0.0.1:9/")
    }

    @Test func tokensAreLongRandomAndSafeInAURL() {
        let tokens = (0..<20).map { _ in WebAddress.makeToken() }
        #expect(Set(tokens).count == tokens.count)
        for token in tokens {
            #expect(token.count == 43)
            #expect(token.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        }
        #expect(WebGate.same("abc", "abc") && !WebGate.same("abc", "abd") && !WebGate.same("ab", "abc"))
    }

    @Test func thePageEscapesTheFolderAndCarriesItsPolicy() {
        let page = WebPage(saveTo: "/home/a\"><script>alert(1)</script>")
        let html = String(decoding: page.response.body, as: UTF8.self)
        #expect(!html.contains("<script>alert"))
        #expect(html.contains("/home/a&quot;&gt;&lt;script&gt;"))
        let policy = page.response.headers.first { $0.name == "Content-Security-Policy" }?.value ?? ""
        #expect(policy.hasPrefix("default-src 'none'; script-src 'sha256-"))
        #expect(policy.contains("connect-src 'self'") && policy.contains("frame-ancestors 'none'"))
        #expect(html.contains("<script>\(WebPage.script)</script>"))
    }
}
