import Foundation
import Testing

@testable import Ferry

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("RedirectPlan (RFC 9110 §15.4)")
struct RedirectPlanTests {
    func response(_ status: Int, location: String?, from url: String = "http://a.test/start") -> HTTPResponse {
        var headers = HeaderFields()
        if let location { headers["Location"] = location }
        return HTTPResponse(url: URL(string: url)!, statusCode: status, headers: headers)
    }

    func request(_ method: HTTPMethod, body: Bool = false) -> URLRequest {
        var request = URLRequest(url: URL(string: "http://a.test/start")!, method: method)
        request.setValue("Bearer secret", forHTTPHeaderField: "Authorization")
        if body {
            request.httpBody = Data("x".utf8)
            request.setValue("text/plain", forHTTPHeaderField: "Content-Type")
        }
        return request
    }

    @Test(arguments: [(301, "GET"), (302, "GET"), (303, "GET"), (307, "POST"), (308, "POST")])
    func postMethodRewrite(status: Int, expectedMethod: String) throws {
        let plan = RedirectPlan.make(
            for: request(.post, body: true),
            response: response(status, location: "/next"),
            bodyIsReplayable: true,
            hasBody: true
        )
        guard case .follow(let next, let keepsBody) = plan else {
            Issue.record("expected a redirect, got \(plan)")
            return
        }
        #expect(next.method.rawValue == expectedMethod)
        #expect(next.url?.absoluteString == "http://a.test/next")
        #expect(keepsBody == (expectedMethod == "POST"))
        if !keepsBody {
            #expect(next.httpBody == nil)
            #expect(next.value(forHTTPHeaderField: "Content-Type") == nil)
        }
    }

    @Test func headStaysHeadOn303() {
        guard
            case .follow(let next, _) = RedirectPlan.make(
                for: request(.head),
                response: response(303, location: "/x"),
                bodyIsReplayable: true,
                hasBody: false
            )
        else {
            Issue.record("expected a redirect")
            return
        }
        #expect(next.method == .head)
    }

    @Test func credentialsStayWithTheOrigin() {
        let same = RedirectPlan.make(
            for: request(.get),
            response: response(302, location: "/x"),
            bodyIsReplayable: true,
            hasBody: false
        )
        let other = RedirectPlan.make(
            for: request(.get),
            response: response(302, location: "http://b.test/x"),
            bodyIsReplayable: true,
            hasBody: false
        )
        let otherPort = RedirectPlan.make(
            for: request(.get),
            response: response(302, location: "http://a.test:81/x"),
            bodyIsReplayable: true,
            hasBody: false
        )
        if case .follow(let next, _) = same { #expect(next.value(forHTTPHeaderField: "Authorization") != nil) }
        if case .follow(let next, _) = other { #expect(next.value(forHTTPHeaderField: "Authorization") == nil) }
        if case .follow(let next, _) = otherPort { #expect(next.value(forHTTPHeaderField: "Authorization") == nil) }
    }

    @Test func notRedirects() {
        for status in [200, 300, 304, 305, 404] {
            #expect(
                RedirectPlan.make(
                    for: request(.get),
                    response: response(status, location: "/x"),
                    bodyIsReplayable: true,
                    hasBody: false
                ) == .notARedirect
            )
        }
        #expect(
            RedirectPlan.make(
                for: request(.get),
                response: response(302, location: nil),
                bodyIsReplayable: true,
                hasBody: false
            )
                == .notARedirect
        )
    }

    @Test func nonHTTPTargetsAndOneShotBodiesFail() {
        let ftp = RedirectPlan.make(
            for: request(.get),
            response: response(302, location: "ftp://x/y"),
            bodyIsReplayable: true,
            hasBody: false
        )
        guard case .fail(let error) = ftp else {
            Issue.record("expected failure")
            return
        }
        #expect(error.reason == .redirectFailed)
        let stream = RedirectPlan.make(
            for: request(.put, body: true),
            response: response(307, location: "/x"),
            bodyIsReplayable: false,
            hasBody: true
        )
        guard case .fail(let streamError) = stream else {
            Issue.record("expected failure")
            return
        }
        #expect(streamError.reason == .bodyNotReplayable)
    }

    @Test func httpsToHttpIsRefusedUnlessAllowed() {
        var secure = URLRequest(url: URL(string: "https://a.test/start")!)
        secure.method = .get
        let downgrade = response(302, location: "http://a.test/plain", from: "https://a.test/start")
        guard
            case .fail(let error) = RedirectPlan.make(
                for: secure,
                response: downgrade,
                bodyIsReplayable: true,
                hasBody: false
            )
        else {
            Issue.record("an https → http redirect was followed")
            return
        }
        #expect(error.reason == .redirectFailed)
        guard
            case .follow(let next, _) = RedirectPlan.make(
                for: secure,
                response: downgrade,
                bodyIsReplayable: true,
                hasBody: false,
                allowsInsecure: true
            )
        else {
            Issue.record("allowsInsecure did not allow it")
            return
        }
        #expect(next.url?.scheme == "http")
        // http → https is an upgrade: always fine.
        let upgrade = response(302, location: "https://a.test/x")
        guard
            case .follow = RedirectPlan.make(
                for: request(.get),
                response: upgrade,
                bodyIsReplayable: true,
                hasBody: false
            )
        else {
            Issue.record("an upgrade was refused")
            return
        }
    }

    @Test func aRequestPointedAtAnotherOriginLosesItsCredentials() throws {
        var request = URLRequest(url: try #require(URL(string: "https://a.example/f")))
        for field in ["Authorization", "Cookie", "Proxy-Authorization", "X-Trace"] {
            request.setValue("v", forHTTPHeaderField: field)
        }
        let elsewhere = RedirectPlan.request(request, pointedAt: try #require(URL(string: "https://b.example/f")))
        #expect(elsewhere.url?.host == "b.example")
        #expect(elsewhere.value(forHTTPHeaderField: "Authorization") == nil)
        #expect(elsewhere.value(forHTTPHeaderField: "Cookie") == nil)
        #expect(elsewhere.value(forHTTPHeaderField: "Proxy-Authorization") == nil)
        #expect(elsewhere.value(forHTTPHeaderField: "X-Trace") == "v")
        let otherPort = RedirectPlan.request(request, pointedAt: try #require(URL(string: "https://a.example:8443/f")))
        #expect(otherPort.value(forHTTPHeaderField: "Authorization") == nil)
        let same = RedirectPlan.request(request, pointedAt: try #require(URL(string: "https://a.example/mirror/f")))
        #expect(same.value(forHTTPHeaderField: "Authorization") == "v")
    }
}
