import NIOCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#else
import Foundation
#endif

/// The request loop as a value: which request a task sends next, from its first through
/// every redirect, authentication challenge, proxy challenge and interceptor retry, to the
/// response it delivers or the error it ends with. No I/O: ``Transfer`` sends each hop it
/// returns, asks the interceptor and the credential sources, and reports back.
///
/// ## Events and actions
/// - ``start()`` — the first current.
/// - ``next(after:)`` with ``Event/followUp(_:)``: a response that sends the request on
///   (credentials, a redirect) — the next hop, or a redirect loop's error.
/// - ``Event/errorStatus(_:_:)``: a final response of 400 or more, its body buffered — ask
///   the interceptor.
/// - ``Event/failed(_:_:responded:cancelled:)``: the hop failed — answer the proxy's
///   challenge, ask the interceptor, or fail.
/// - ``Event/proxyAnswered(_:)``, ``Event/interceptorDecided(_:)``: the answers to those
///   questions.
///
/// A final response that goes to the task's consumer is not an event: the owner delivers
/// it and the loop ends.
///
/// ## Guarantees
/// - The only place that decides whether the request is sent again, and how often: the
///   caps on redirects and on answered challenges (``Limits``) are counted here.
/// - A one-shot body is never sent twice: no proxy answer, no interceptor retry for it.
/// - A request that was answered, was cancelled, or failed as cancelled is never retried.
/// - The same method and URL redirected to a third time ends the loop, whatever the hop
///   limit; a redirect past ``Limits/redirects`` ends it too. A redirect the loop refuses
///   is never announced: the owner records a redirect when it sends the hop that follows it
///   (``Hop/redirectedBy``).
/// - At most ``Limits/challengeAnswers`` origin challenges are answered between interceptor
///   retries (then the `401` is the response), and as many proxy challenges over the loop.
/// - Every hop after a retry may be challenged afresh; proxy challenges are counted over
///   the whole loop.
struct RequestLoop {
    /// One request to send.
    struct Hop {
        var request: URLRequest
        var body: RequestBody?
        /// Why it is sent (for its metrics).
        var reason: TransactionMetrics.Reason
        /// Redirects followed before it.
        var redirects: Int
        /// Origin challenges answered since the last interceptor retry.
        var challengesAnswered: Int
        /// Whether a request went before it (the body's count of bytes sent starts over).
        var isRepeat: Bool
        /// The response whose redirect this hop follows, when it follows one (the owner
        /// records the redirect as it sends the hop).
        var redirectedBy: HTTPResponse?
    }

    /// How often the loop sends a request again, at most.
    struct Limits: Equatable {
        /// Most redirects followed (``SessionConfiguration/maximumRedirects``).
        var redirects: Int
        /// Most origin challenges answered between interceptor retries, and most proxy
        /// challenges answered over the loop: a delegate that keeps offering refused
        /// credentials does not loop forever.
        var challengeAnswers = 5
    }

    /// Where a response sends its request next, when it is not the request's last.
    enum FollowUp: Equatable {
        /// The same request again, with credentials.
        case authenticate(URLRequest)
        /// A redirect's target, proposed by `response`.
        case redirect(URLRequest, keepsBody: Bool, from: HTTPResponse)
    }

    /// What happened to the hop last returned, or the answer to the last question asked.
    enum Event {
        /// The response sends the request on.
        case followUp(FollowUp)
        /// A final response of 400 or more, its body read, for the interceptor to judge.
        case errorStatus(HTTPResponse, CircularBuffer<ByteBuffer>)
        /// The hop failed with `error` (`failure` as Ferry reports it); `responded` when a
        /// response head had arrived; `cancelled` when the task or its Swift task was.
        case failed(any Error, FerryError, responded: Bool, cancelled: Bool)
        /// The proxy's challenge was answered (the engine has the new authorization) or not.
        case proxyAnswered(Bool)
        /// The interceptor's decision: the adapted request to send, or `nil` for no retry.
        case interceptorDecided(URLRequest?)
    }

    /// What the owner does next.
    enum Action {
        /// Send this hop, then report what happened.
        case send(Hop)
        /// Find credentials for the proxy's challenge (`failures` answers so far), then
        /// report ``Event/proxyAnswered(_:)``.
        case answerProxy(ProxyChallenge, failures: Int)
        /// Ask the interceptor about `request` (`attempt` retries so far), not holding a
        /// connection slot; wait out its delay, adapt the request, then report
        /// ``Event/interceptorDecided(_:)``.
        case askInterceptor(URLRequest, RequestFailure, attempt: Int)
        /// Deliver this error response, its body buffered, as the final one.
        case deliver(HTTPResponse, CircularBuffer<ByteBuffer>)
        /// End with this error.
        case fail(any Error)
    }

    /// What the loop waits for.
    private enum State {
        /// The hop's outcome.
        case sending
        /// Whether the proxy's challenge was answered; `failure` if it was not.
        case answeringProxy(any Error, FerryError)
        /// The interceptor's decision, and why it was asked.
        case askingInterceptor(Asked)
        /// Nothing: the loop has ended.
        case ended
    }

    /// Why the interceptor was asked: what the loop ends with when it declines.
    private enum Asked {
        case failure(any Error)
        case response(HTTPResponse, CircularBuffer<ByteBuffer>)
    }

    /// The hop last returned.
    private(set) var current: Hop
    /// The origin the session's credential was given for: the task's own, also for a hop
    /// after a redirect or a retry.
    let home: Origin?
    /// Whether the caller set `Authorization` itself (the session then adds none).
    let userAuthorization: Bool
    /// Whether the caller set `Cookie` itself (the session's store then adds none).
    let userCookies: Bool
    let limits: Limits
    private var state = State.sending
    /// Whether an interceptor may retry requests.
    private let intercepts: Bool
    private(set) var interceptorRetries = 0
    private(set) var proxyChallengesAnswered = 0
    /// How often each method and URL was redirected to.
    private var visited: [String: Int] = [:]

    /// - Parameters:
    ///   - request: The first request, adapted by the interceptor when there is one.
    ///   - reason: Why it is sent (`.resume` when the task sent requests before).
    ///   - home: The origin of the task's original request.
    ///   - intercepts: Whether the session has an interceptor that may retry.
    ///   - limits: How often the request may be sent again.
    init(
        request: URLRequest,
        body: RequestBody?,
        reason: TransactionMetrics.Reason,
        home: Origin?,
        intercepts: Bool,
        limits: Limits
    ) {
        self.current = Hop(
            request: request,
            body: body,
            reason: reason,
            redirects: 0,
            challengesAnswered: 0,
            isRepeat: false,
            redirectedBy: nil
        )
        self.home = home
        self.userAuthorization = request.value(forHTTPHeaderField: "Authorization") != nil
        self.userCookies = request.value(forHTTPHeaderField: "Cookie") != nil
        self.intercepts = intercepts
        self.limits = limits
    }

    /// The first current.
    func start() -> Action { .send(current) }

    /// Whether a `401` to the hop last returned may be answered with credentials: fewer than
    /// ``Limits/challengeAnswers`` were answered since the last interceptor retry. Asked
    /// before the credential sources (and the delegate) are.
    var answersChallenge: Bool { current.challengesAnswered < limits.challengeAnswers }

    /// Whether a final response with this status goes to the interceptor (with its body
    /// read) before the task gets it.
    func asksInterceptor(aboutStatus statusCode: Int) -> Bool {
        intercepts && statusCode >= 400 && (current.body?.isReplayable ?? true)
    }

    /// What to do after `event`.
    mutating func next(after event: Event) -> Action {
        switch (state, event) {
        case (.sending, .followUp(.authenticate(let retry))):
            current.challengesAnswered += 1
            return sendAgain(retry, reason: .authentication)
        case (.sending, .followUp(.redirect(let next, let keepsBody, let response))):
            guard current.redirects < limits.redirects else {
                state = .ended
                return .fail(
                    FerryError(
                        .redirectFailed,
                        "Stopped after \(limits.redirects) redirects (maximumRedirects).",
                        response: response
                    )
                )
            }
            let key = next.method.rawValue + " " + (next.url?.absoluteString ?? "")
            visited[key, default: 0] += 1
            guard visited[key, default: 0] <= 2 else {
                state = .ended
                return .fail(
                    FerryError(
                        .redirectFailed,
                        "Redirect loop: \(next.url?.absoluteString ?? "the same URL") was redirected to again and again."
                    )
                )
            }
            current.redirects += 1
            if !keepsBody { current.body = nil }
            return sendAgain(next, reason: .redirect, redirectedBy: response)
        case (.sending, .errorStatus(let head, let buffered)):
            return ask(about: current.request, .response(head), asked: .response(head, buffered))
        case (.sending, .failed(let error, let failure, let responded, let cancelled)):
            let replayable = current.body?.isReplayable ?? true
            if let challenge = error as? ProxyChallenge, !responded, replayable,
                proxyChallengesAnswered < limits.challengeAnswers
            {
                state = .answeringProxy(error, failure)
                return .answerProxy(challenge, failures: proxyChallengesAnswered)
            }
            return retryOrFail(error, failure, responded: responded, cancelled: cancelled)
        case (.answeringProxy(let error, let failure), .proxyAnswered(let answered)):
            guard answered else { return retryOrFail(error, failure, responded: false, cancelled: false) }
            proxyChallengesAnswered += 1
            return sendAgain(current.request, reason: .authentication)
        case (.askingInterceptor(let asked), .interceptorDecided(let adapted)):
            guard let adapted else {
                state = .ended
                switch asked {
                case .failure(let error): return .fail(error)
                case .response(let head, let buffered): return .deliver(head, buffered)
                }
            }
            interceptorRetries += 1
            current.challengesAnswered = 0
            return sendAgain(adapted, reason: .retry)
        case (.ended, _), (.sending, _), (.answeringProxy, _), (.askingInterceptor, _):
            // An event the loop did not ask for: the owner's mistake, ended rather than trusted.
            state = .ended
            return .fail(FerryError(.invalidRequest, "The request loop received an event it did not wait for."))
        }
    }

    /// The interceptor's turn for a failure, when it may send the request again.
    private mutating func retryOrFail(
        _ error: any Error,
        _ failure: FerryError,
        responded: Bool,
        cancelled: Bool
    ) -> Action {
        guard intercepts, !responded, !cancelled, failure.reason != .cancelled, current.body?.isReplayable ?? true
        else {
            state = .ended
            return .fail(error)
        }
        return ask(about: current.request, .error(failure), asked: .failure(error))
    }

    private mutating func ask(about request: URLRequest, _ failure: RequestFailure, asked: Asked) -> Action {
        state = .askingInterceptor(asked)
        return .askInterceptor(request, failure, attempt: interceptorRetries)
    }

    private mutating func sendAgain(
        _ request: URLRequest,
        reason: TransactionMetrics.Reason,
        redirectedBy response: HTTPResponse? = nil
    ) -> Action {
        state = .sending
        current.request = request
        current.reason = reason
        current.isRepeat = true
        current.redirectedBy = response
        return .send(current)
    }
}
