#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif

/// Adapts requests before they are sent and decides whether a failed one is sent again:
/// Alamofire's `RequestInterceptor`, for Ferry sessions.
///
/// ## Lifecycle and threading
/// Set one on ``SessionConfiguration/interceptor``; the session keeps it for its lifetime and
/// calls it from many tasks at once, so it must be thread-safe. ``adapt(_:for:)`` runs before
/// every request a task sends (its first attempt, each retry, each range request of a
/// download), not before redirects, which follow the server's answer. ``retry(_:for:dueTo:attemptCount:)``
/// runs when a final response has a status of 400 or more (after authentication challenges
/// and redirects were handled) or when a request failed before any response arrived; the
/// task waits for the answer. A request whose body is a one-shot stream is never retried.
///
/// ```swift
/// struct APIKey: RequestInterceptor {
///     func adapt(_ request: URLRequest, for session: Session) async throws -> URLRequest {
///         var request = request
///         request.setValue(key, forHTTPHeaderField: "X-API-Key")
///         return request
///     }
/// }
/// ```
public protocol RequestInterceptor: Sendable {
    /// The request to send instead of `request`. Throwing fails the task with the error
    /// (a ``FerryError`` as it is, anything else as ``FerryError/Reason/invalidRequest``).
    func adapt(_ request: URLRequest, for session: Session) async throws -> URLRequest

    /// Whether to send the request again after `failure`. `attemptCount` is how many
    /// times this task's request was already retried by the interceptor.
    func retry(
        _ request: URLRequest,
        for session: Session,
        dueTo failure: RequestFailure,
        attemptCount: Int
    ) async -> RetryDecision
}

extension RequestInterceptor {
    public func adapt(_ request: URLRequest, for session: Session) async throws -> URLRequest { request }

    public func retry(
        _ request: URLRequest,
        for session: Session,
        dueTo failure: RequestFailure,
        attemptCount: Int
    ) async -> RetryDecision { .doNotRetry }
}

/// Why ``RequestInterceptor/retry(_:for:dueTo:attemptCount:)`` is asked.
public enum RequestFailure: Sendable {
    /// The final response has a status of 400 or more.
    case response(HTTPResponse)
    /// The request failed before any response arrived.
    case error(FerryError)
}

/// A ``RequestInterceptor``'s answer.
public enum RetryDecision: Sendable, Equatable {
    /// Adapt the request again and send it.
    case retry
    /// The same, after waiting.
    case retryWithDelay(Duration)
    /// Deliver the response (or the error) as it is.
    case doNotRetry
}
