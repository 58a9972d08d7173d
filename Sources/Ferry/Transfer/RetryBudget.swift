import Foundation

/// A transfer's one retry step: counts the tries and asks the retry policy whether, and
/// after how long, to try again. A value with no I/O; every loop that retries (the
/// download loop, its segments, a download written in order) takes its decision here.
struct RetryBudget: Sendable, Equatable {
    /// What to do after a failure.
    enum Decision: Sendable, Equatable {
        /// Try again after `delay` seconds; `attempt` counts from 1.
        case retry(attempt: Int, delay: TimeInterval)
        /// The failure is final: cancelled, not transient, or the budget is spent.
        case giveUp
    }

    let policy: RetryPolicy
    /// Retries taken so far.
    private(set) var retries = 0

    init(policy: RetryPolicy) { self.policy = policy }

    /// The decision after `error`; `cancelled` when the transfer's Swift task was cancelled.
    /// Only a retry spends the budget: a cancellation or a final error spends nothing.
    mutating func decide(after error: FerryError, cancelled: Bool) -> Decision {
        if cancelled || error.reason == .cancelled { return .giveUp }
        let attempt = retries + 1
        guard let delay = policy.delay(beforeRetry: attempt, after: error) else { return .giveUp }
        retries = attempt
        return .retry(attempt: attempt, delay: delay)
    }
}
