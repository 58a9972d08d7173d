public import Foundation

/// When a failed download is tried again (by resuming it) and how long to wait first.
///
/// Transient failures are retried: a connection lost or refused, an idle timeout, a body cut
/// short, and the statuses 408, 429, 500, 502, 503 and 504. Other 4xx and 5xx statuses,
/// cancellation, file-system errors and the resource timeout are final. The wait grows
/// exponentially from ``baseDelay`` up to ``maximumDelay`` with full jitter, and a
/// `Retry-After` the server sent (seconds or an HTTP-date) is honoured up to
/// ``maximumRetryAfter``.
///
/// ```swift
/// configuration.retryPolicy = RetryPolicy(maximumRetries: 10)
/// task.retryPolicy = .none
/// ```
public struct RetryPolicy: Sendable, Equatable {
    /// Tries after the first; 0 means none.
    public var maximumRetries: Int
    /// The first wait.
    public var baseDelay: TimeInterval
    /// The longest wait between tries.
    public var maximumDelay: TimeInterval
    /// The longest `Retry-After` honoured.
    public var maximumRetryAfter: TimeInterval
    /// Also retry what is not transient but came from the server or the network: any
    /// error status (a 404 included), a refused TLS handshake, a redirect that cannot be
    /// followed, a resource timeout (curl's `--retry-all-errors`). Cancellation and local
    /// errors (the file system, a bad request, a checksum that does not match) stay final.
    /// Default `false`.
    public var retriesAllErrors = false

    /// A policy of at most `maximumRetries` retries, waiting `baseDelay` doubled each time up to `maximumDelay`, and a server's `Retry-After` up to `maximumRetryAfter`.
    public init(
        maximumRetries: Int = 5,
        baseDelay: TimeInterval = 0.5,
        maximumDelay: TimeInterval = 30,
        maximumRetryAfter: TimeInterval = 300
    ) {
        self.maximumRetries = max(0, maximumRetries)
        self.baseDelay = max(0, baseDelay)
        self.maximumDelay = max(0, maximumDelay)
        self.maximumRetryAfter = max(0, maximumRetryAfter)
    }

    /// Five retries from half a second, at most 30 s apart.
    public static let `default` = RetryPolicy()
    /// Never retry.
    public static let none = RetryPolicy(maximumRetries: 0)

    static let retriedStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// Whether this policy tries again after `error`.
    func retries(_ error: FerryError) -> Bool {
        Self.isTransient(error) || (retriesAllErrors && error.reason.isServerOrNetwork)
    }

    /// Whether `error` is worth another try.
    static func isTransient(_ error: FerryError) -> Bool {
        switch error.reason.code {
        case .network, .badServerResponse, .timedOut(.idle): true
        case .unacceptableStatusCode(let status): retriedStatuses.contains(status)
        default: false
        }
    }

    /// The wait before retry number `retry` (1-based) after `error`, or `nil` to give up.
    func delay(
        beforeRetry retry: Int,
        after error: FerryError,
        now: Date = Date(),
        random: (ClosedRange<Double>) -> Double = { Double.random(in: $0) }
    ) -> TimeInterval? {
        guard retry <= maximumRetries, retries(error) else { return nil }
        if let value = error.response?.headers["Retry-After"], let wait = Self.retryAfter(value, now: now) {
            return min(wait, maximumRetryAfter)
        }
        let ceiling = min(maximumDelay, baseDelay * pow(2, Double(retry - 1)))
        return random(0...ceiling)
    }

    /// Seconds from `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date.
    static func retryAfter(_ value: String, now: Date) -> TimeInterval? {
        let trimmed = value.trimmingWhitespace()
        if let seconds = Int(trimmed), seconds >= 0 { return TimeInterval(seconds) }
        return HTTPDate.parse(trimmed).map { max(0, $0.timeIntervalSince(now)) }
    }
}
