import Foundation
import NIOCore
import Testing

@testable import Ferry

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every event of the request loop, in each state that can receive it, and the events it
/// did not ask for: what it decides, with no I/O (the integration suites run the same loop
/// against real servers, proxies and interceptors).
@Suite("RequestLoop")
struct RequestLoopTests {
    let head = HTTPResponse(url: URL(string: "http://h/a")!, statusCode: 503, headers: HeaderFields([]))
    let moved = HTTPResponse(url: URL(string: "http://h/a")!, statusCode: 302, headers: HeaderFields([]))
    let refused = FerryError(.network, "refused")
    let challenge = ProxyChallenge(proxy: .http(host: "proxy", port: 3128), challenges: ["Basic realm=\"p\""])
    let oneShot = RequestBody.stream(ByteChunks { ByteChunks.Iterator { nil } }, length: nil)

    func request(_ path: String, _ method: HTTPMethod = .get) throws -> URLRequest {
        URLRequest(url: try #require(URL(string: "http://h\(path)")), method: method)
    }

    func loop(
        body: RequestBody? = nil,
        intercepts: Bool = true,
        headers: [String: String] = [:],
        limits: RequestLoop.Limits = RequestLoop.Limits(redirects: 20)
    ) throws -> RequestLoop {
        var first = try request("/a")
        for (name, value) in headers { first.setValue(value, forHTTPHeaderField: name) }
        return RequestLoop(
            request: first,
            body: body,
            reason: .initial,
            home: Origin(try #require(URL(string: "http://h/a"))),
            intercepts: intercepts,
            limits: limits
        )
    }

    /// The action in a form tests compare.
    enum Seen: Equatable {
        case send(path: String, reason: TransactionMetrics.Reason, redirects: Int, challenges: Int, body: Bool)
        case answerProxy(failures: Int)
        case askInterceptor(path: String, response: Int?, error: FerryError.Reason?, attempt: Int)
        case deliver(status: Int, buffers: Int)
        case fail(FerryError.Reason?, proxyChallenge: Bool)
    }

    func seen(_ action: RequestLoop.Action) -> Seen {
        switch action {
        case .send(let hop):
            .send(
                path: hop.request.url?.path ?? "",
                reason: hop.reason,
                redirects: hop.redirects,
                challenges: hop.challengesAnswered,
                body: hop.body != nil
            )
        case .answerProxy(_, let failures):
            .answerProxy(failures: failures)
        case .askInterceptor(let request, .response(let head), let attempt):
            .askInterceptor(path: request.url?.path ?? "", response: head.statusCode, error: nil, attempt: attempt)
        case .askInterceptor(let request, .error(let error), let attempt):
            .askInterceptor(path: request.url?.path ?? "", response: nil, error: error.reason, attempt: attempt)
        case .deliver(let head, let buffers):
            .deliver(status: head.statusCode, buffers: buffers.count)
        case .fail(let error):
            .fail((error as? FerryError)?.reason, proxyChallenge: error is ProxyChallenge)
        }
    }

    func failed(_ error: any Error, responded: Bool = false, cancelled: Bool = false) -> RequestLoop.Event {
        .failed(error, (error as? FerryError) ?? refused, responded: responded, cancelled: cancelled)
    }

    // MARK: Start

    @Test func theFirstHopIsTheRequestAsGiven() throws {
        let loop = try loop(body: .data(Data("x".utf8)), headers: ["Authorization": "Bearer t"])
        #expect(seen(loop.start()) == .send(path: "/a", reason: .initial, redirects: 0, challenges: 0, body: true))
        #expect(loop.current.isRepeat == false)
        #expect(loop.userAuthorization && !loop.userCookies)
        #expect(loop.home?.host == "h")
    }

    // MARK: Follow-ups

    @Test func aChallengeSendsTheSameRequestAgainWithCredentials() throws {
        var loop = try loop(body: .data(Data("x".utf8)))
        let action = loop.next(after: .followUp(.authenticate(try request("/a"))))
        #expect(seen(action) == .send(path: "/a", reason: .authentication, redirects: 0, challenges: 1, body: true))
        #expect(loop.current.isRepeat)
    }

    @Test func aRedirectKeepsOrDropsTheBodyAsItSays() throws {
        var loop = try loop(body: .data(Data("x".utf8)))
        #expect(
            seen(loop.next(after: .followUp(.redirect(try request("/b", .post), keepsBody: true, from: moved))))
                == .send(path: "/b", reason: .redirect, redirects: 1, challenges: 0, body: true)
        )
        #expect(
            seen(loop.next(after: .followUp(.redirect(try request("/c"), keepsBody: false, from: moved))))
                == .send(path: "/c", reason: .redirect, redirects: 2, challenges: 0, body: false)
        )
        // A body once dropped stays dropped.
        #expect(
            seen(loop.next(after: .followUp(.redirect(try request("/d"), keepsBody: true, from: moved))))
                == .send(path: "/d", reason: .redirect, redirects: 3, challenges: 0, body: false)
        )
    }

    @Test func theSameRequestAThirdTimeIsALoop() throws {
        var loop = try loop(intercepts: false)
        for path in ["/b", "/a", "/b"] {
            _ = loop.next(after: .followUp(.redirect(try request(path), keepsBody: false, from: moved)))
        }
        // A different method is a different request.
        #expect(
            seen(loop.next(after: .followUp(.redirect(try request("/b", .head), keepsBody: false, from: moved))))
                == .send(path: "/b", reason: .redirect, redirects: 4, challenges: 0, body: false)
        )
        #expect(
            seen(loop.next(after: .followUp(.redirect(try request("/b"), keepsBody: false, from: moved))))
                == .fail(.redirectFailed, proxyChallenge: false)
        )
        // And the loop has ended: nothing sends again.
        #expect(
            seen(loop.next(after: .followUp(.authenticate(try request("/b")))))
                == .fail(.invalidRequest, proxyChallenge: false)
        )
    }

    // MARK: Error statuses and the interceptor

    @Test func anErrorStatusGoesToTheInterceptorOnlyWhenItCanRetry() throws {
        #expect(try loop().asksInterceptor(aboutStatus: 503))
        #expect(try !loop().asksInterceptor(aboutStatus: 399))
        #expect(try !loop(intercepts: false).asksInterceptor(aboutStatus: 503))
        #expect(try !loop(body: oneShot).asksInterceptor(aboutStatus: 503))
        #expect(try loop(body: .data(Data())).asksInterceptor(aboutStatus: 401))
    }

    @Test func aDeclinedErrorStatusIsDeliveredWithItsBody() throws {
        var loop = try loop()
        let buffers = CircularBuffer([ByteBuffer(string: "busy"), ByteBuffer(string: "!")])
        #expect(
            seen(loop.next(after: .errorStatus(head, buffers)))
                == .askInterceptor(path: "/a", response: 503, error: nil, attempt: 0)
        )
        #expect(seen(loop.next(after: .interceptorDecided(nil))) == .deliver(status: 503, buffers: 2))
        // Delivered: the loop has ended.
        #expect(seen(loop.next(after: .interceptorDecided(nil))) == .fail(.invalidRequest, proxyChallenge: false))
    }

    @Test func anInterceptorRetrySendsTheAdaptedRequestAndIsChallengedAfresh() throws {
        var loop = try loop(body: .data(Data("x".utf8)))
        _ = loop.next(after: .followUp(.authenticate(try request("/a"))))
        _ = loop.next(after: .errorStatus(head, []))
        #expect(
            seen(loop.next(after: .interceptorDecided(try request("/a2"))))
                == .send(path: "/a2", reason: .retry, redirects: 0, challenges: 0, body: true)
        )
        #expect(loop.interceptorRetries == 1)
        // The second question counts the first retry.
        #expect(
            seen(loop.next(after: .errorStatus(head, [])))
                == .askInterceptor(path: "/a2", response: 503, error: nil, attempt: 1)
        )
    }

    @Test func aFailureBeforeAnyResponseGoesToTheInterceptor() throws {
        var loop = try loop()
        #expect(
            seen(loop.next(after: failed(refused)))
                == .askInterceptor(path: "/a", response: nil, error: .network, attempt: 0)
        )
        #expect(seen(loop.next(after: .interceptorDecided(nil))) == .fail(.network, proxyChallenge: false))
    }

    @Test func failuresTheInterceptorNeverSees() throws {
        // No interceptor; a response had arrived; cancelled; failed as cancelled; a one-shot body.
        let cases: [(RequestLoop, RequestLoop.Event)] = [
            (try loop(intercepts: false), failed(refused)),
            (try loop(), failed(refused, responded: true)),
            (try loop(), failed(refused, cancelled: true)),
            (try loop(), failed(FerryError(.cancelled, "stopped"))),
            (try loop(body: oneShot), failed(refused)),
        ]
        for (start, event) in cases {
            var loop = start
            let expected = (event.failure?.reason).map { Seen.fail($0, proxyChallenge: false) }
            #expect(seen(loop.next(after: event)) == expected)
        }
    }

    // MARK: The caps

    @Test func aRedirectPastTheLimitEndsTheLoopWithItsResponse() throws {
        var loop = try loop(limits: RequestLoop.Limits(redirects: 2))
        for (path, count) in [("/b", 1), ("/c", 2)] {
            #expect(
                seen(loop.next(after: .followUp(.redirect(try request(path), keepsBody: false, from: moved))))
                    == .send(path: path, reason: .redirect, redirects: count, challenges: 0, body: false)
            )
        }
        let ended = loop.next(after: .followUp(.redirect(try request("/d"), keepsBody: false, from: moved)))
        guard case .fail(let error) = ended else {
            Issue.record("expected the loop to fail, got \(ended)")
            return
        }
        let ferryError = try #require(error as? FerryError)
        #expect(ferryError.reason == .redirectFailed)
        #expect(ferryError.response == moved)
        #expect(ferryError.message.contains("2 redirects"))
        // The refused redirect never became the current hop.
        #expect(loop.current.request.url?.path == "/c")
        #expect(seen(loop.next(after: .proxyAnswered(true))) == .fail(.invalidRequest, proxyChallenge: false))
        // No redirects allowed: the first one ends the loop.
        var none = try self.loop(limits: RequestLoop.Limits(redirects: 0))
        #expect(
            seen(none.next(after: .followUp(.redirect(try request("/b"), keepsBody: false, from: moved))))
                == .fail(.redirectFailed, proxyChallenge: false)
        )
    }

    @Test func aHopNamesTheRedirectItFollowsAndNoOther() throws {
        var loop = try loop()
        #expect(loop.current.redirectedBy == nil)
        _ = loop.next(after: .followUp(.redirect(try request("/b"), keepsBody: false, from: moved)))
        #expect(loop.current.redirectedBy == moved)
        _ = loop.next(after: .followUp(.authenticate(try request("/b"))))
        #expect(loop.current.redirectedBy == nil)
        _ = loop.next(after: .errorStatus(head, []))
        _ = loop.next(after: .interceptorDecided(try request("/b")))
        #expect(loop.current.redirectedBy == nil)
    }

    @Test func challengesAreAnsweredUpToTheLimitBetweenRetries() throws {
        var loop = try loop(limits: RequestLoop.Limits(redirects: 20, challengeAnswers: 2))
        #expect(loop.answersChallenge)
        _ = loop.next(after: .followUp(.authenticate(try request("/a"))))
        #expect(loop.answersChallenge)
        _ = loop.next(after: .followUp(.authenticate(try request("/a"))))
        #expect(!loop.answersChallenge)
        // A redirect keeps the count: the challenges are the request's.
        _ = loop.next(after: .followUp(.redirect(try request("/b"), keepsBody: false, from: moved)))
        #expect(!loop.answersChallenge)
        // An interceptor retry starts it again.
        _ = loop.next(after: .errorStatus(head, []))
        _ = loop.next(after: .interceptorDecided(try request("/b")))
        #expect(loop.answersChallenge)
        #expect(!(try self.loop(limits: RequestLoop.Limits(redirects: 20, challengeAnswers: 0))).answersChallenge)
    }

    @Test func proxyChallengesPastTheLimitAreNotAnswered() throws {
        var loop = try loop(intercepts: false, limits: RequestLoop.Limits(redirects: 20, challengeAnswers: 2))
        for failures in 0..<2 {
            #expect(seen(loop.next(after: failed(challenge))) == .answerProxy(failures: failures))
            _ = loop.next(after: .proxyAnswered(true))
        }
        // The third challenge is the failure: the loop ends with it.
        #expect(seen(loop.next(after: failed(challenge))) == .fail(nil, proxyChallenge: true))
        // With an interceptor, it is the interceptor's to judge.
        var intercepted = try self.loop(limits: RequestLoop.Limits(redirects: 20, challengeAnswers: 0))
        guard case .askInterceptor = intercepted.next(after: failed(challenge)) else {
            Issue.record("expected the interceptor to be asked")
            return
        }
    }

    // MARK: The proxy's challenge

    @Test func aProxyChallengeIsAnsweredAndCountedAcrossTheLoop() throws {
        var loop = try loop(body: .data(Data("x".utf8)))
        #expect(seen(loop.next(after: failed(challenge))) == .answerProxy(failures: 0))
        #expect(
            seen(loop.next(after: .proxyAnswered(true)))
                == .send(path: "/a", reason: .authentication, redirects: 0, challenges: 0, body: true)
        )
        #expect(loop.proxyChallengesAnswered == 1)
        // An interceptor retry does not reset the proxy's count.
        _ = loop.next(after: .errorStatus(head, []))
        _ = loop.next(after: .interceptorDecided(try request("/a")))
        #expect(seen(loop.next(after: failed(challenge))) == .answerProxy(failures: 1))
    }

    @Test func anUnansweredProxyChallengeGoesToTheInterceptorOrFails() throws {
        var intercepted = try loop()
        _ = intercepted.next(after: failed(challenge))
        #expect(
            seen(intercepted.next(after: .proxyAnswered(false)))
                == .askInterceptor(path: "/a", response: nil, error: .network, attempt: 0)
        )
        #expect(seen(intercepted.next(after: .interceptorDecided(nil))) == .fail(nil, proxyChallenge: true))

        var plain = try loop(intercepts: false)
        _ = plain.next(after: failed(challenge))
        #expect(seen(plain.next(after: .proxyAnswered(false))) == .fail(nil, proxyChallenge: true))
    }

    @Test func aProxyChallengeIsNotAnsweredForAOneShotBodyOrAfterAResponse() throws {
        var oneShotLoop = try loop(body: oneShot)
        #expect(seen(oneShotLoop.next(after: failed(challenge))) == .fail(nil, proxyChallenge: true))
        var answered = try loop(intercepts: false)
        #expect(seen(answered.next(after: failed(challenge, responded: true))) == .fail(nil, proxyChallenge: true))
    }

    // MARK: Events the loop did not ask for

    @Test func anEventItDidNotWaitForEndsTheLoop() throws {
        let unasked: [RequestLoop.Event] = [.proxyAnswered(true), .interceptorDecided(try request("/x"))]
        for event in unasked {
            var loop = try loop()
            #expect(seen(loop.next(after: event)) == .fail(.invalidRequest, proxyChallenge: false))
        }
        var asking = try loop()
        _ = asking.next(after: .errorStatus(head, []))
        #expect(seen(asking.next(after: .proxyAnswered(true))) == .fail(.invalidRequest, proxyChallenge: false))
        var answering = try loop()
        _ = answering.next(after: failed(challenge))
        #expect(seen(answering.next(after: .errorStatus(head, []))) == .fail(.invalidRequest, proxyChallenge: false))
    }
}

extension RequestLoop.Event {
    /// The failure's reason, for tests.
    fileprivate var failure: FerryError? {
        if case .failed(_, let failure, _, _) = self { return failure }
        return nil
    }
}
