import Foundation
import Testing

@testable import Ferry

/// Which failures a ``RetryPolicy`` tries again, with and without `retriesAllErrors`.
@Suite struct RetryPolicyTests {
    static let transient: [FerryError.Reason] = [
        .network, .badServerResponse, .timedOut(.idle), .unacceptableStatusCode(503), .unacceptableStatusCode(429),
    ]
    static let fromTheServer: [FerryError.Reason] = [
        .unacceptableStatusCode(404), .unacceptableStatusCode(401), .secureConnectionFailed, .redirectFailed,
        .timedOut(.resource), .unacceptableContentType("text/html"),
    ]
    static let local: [FerryError.Reason] = [
        .cancelled, .fileSystem, .invalidRequest, .checksumMismatch, .destinationExists, .bodyNotReplayable,
    ]

    @Test func transientFailuresAreRetriedEitherWay() {
        var all = RetryPolicy(maximumRetries: 1, baseDelay: 0)
        all.retriesAllErrors = true
        for reason in Self.transient {
            #expect(
                RetryPolicy(maximumRetries: 1, baseDelay: 0).delay(beforeRetry: 1, after: FerryError(reason, "")) != nil
            )
            #expect(all.delay(beforeRetry: 1, after: FerryError(reason, "")) != nil)
        }
    }

    @Test func whatTheServerOrNetworkDidIsRetriedOnlyWhenAllErrorsAre() {
        var all = RetryPolicy(maximumRetries: 1, baseDelay: 0)
        all.retriesAllErrors = true
        for reason in Self.fromTheServer {
            #expect(
                RetryPolicy(maximumRetries: 1, baseDelay: 0).delay(beforeRetry: 1, after: FerryError(reason, "")) == nil
            )
            #expect(all.delay(beforeRetry: 1, after: FerryError(reason, "")) != nil, "\(reason)")
            #expect(all.delay(beforeRetry: 2, after: FerryError(reason, "")) == nil, "the budget still holds")
        }
    }

    @Test func localErrorsAndCancellationAreNeverRetried() {
        var all = RetryPolicy(maximumRetries: 5, baseDelay: 0)
        all.retriesAllErrors = true
        for reason in Self.local {
            #expect(all.delay(beforeRetry: 1, after: FerryError(reason, "")) == nil, "\(reason)")
        }
    }
}
