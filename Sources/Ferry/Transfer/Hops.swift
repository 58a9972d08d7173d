#if canImport(FoundationNetworking)
import FoundationNetworking
#else
import Foundation
#endif

/// Where one task's request stands between hops: the request to send next and its body,
/// what the hops so far were, and why the next one is sent. A value type without I/O;
/// `Transfer.send` owns one per call.
struct Hops {
    var request: URLRequest
    var body: RequestBody?
    /// Why the next request is sent (for its metrics).
    var reason: TransactionMetrics.Reason
    private(set) var redirects = 0
    private(set) var challengesAnswered = 0
    private(set) var interceptorRetries = 0
    /// How often each method and URL was redirected to.
    private var visited: [String: Int] = [:]

    init(request: URLRequest, body: RequestBody?, reason: TransactionMetrics.Reason) {
        self.request = request
        self.body = body
        self.reason = reason
    }

    /// Follows a redirect to `next`. The same request a third time is a loop, whatever the
    /// hop limit.
    mutating func redirect(to next: URLRequest, keepsBody: Bool) throws {
        let key = next.method.rawValue + " " + (next.url?.absoluteString ?? "")
        visited[key, default: 0] += 1
        if visited[key, default: 0] > 2 {
            throw FerryError(
                .redirectFailed,
                "Redirect loop: \(next.url?.absoluteString ?? "the same URL") was redirected to again and again."
            )
        }
        redirects += 1
        reason = .redirect
        request = next
        if !keepsBody { body = nil }
    }

    /// Sends the same request again with credentials.
    /// Answers to the proxy's challenges so far.
    private(set) var proxyChallengesAnswered = 0

    /// The same request again, through a proxy that now gets credentials.
    mutating func answerProxyChallenge() {
        proxyChallengesAnswered += 1
        reason = .authentication
    }

    mutating func answerChallenge(with retry: URLRequest) {
        challengesAnswered += 1
        reason = .authentication
        request = retry
    }

    /// Sends the request again as the interceptor decided; a new attempt may be challenged
    /// afresh.
    mutating func retry(with adapted: URLRequest) {
        interceptorRetries += 1
        challengesAnswered = 0
        reason = .retry
        request = adapted
    }
}
