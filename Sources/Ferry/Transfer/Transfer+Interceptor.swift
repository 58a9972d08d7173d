import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The interceptor's part in the request loop: adapting each request, and waiting out the
/// retry it asks for (as the retry policy's waits are: ``waitBeforeRetry(_:)``).
extension Transfer {
    /// `request` as the interceptor adapts it.
    func adapt(_ request: URLRequest, with interceptor: (any RequestInterceptor)?) async throws -> URLRequest {
        guard let interceptor else { return request }
        do {
            return try await interceptor.adapt(request, for: session)
        } catch let error as FerryError {
            throw error
        } catch {
            throw FerryError(.invalidRequest, "The interceptor could not adapt the request.", underlying: error)
        }
    }

    /// Waits out a retry's delay; `false` when the decision is not to retry.
    func prepareRetry(_ decision: RetryDecision) async throws -> Bool {
        switch decision {
        case .doNotRetry: return false
        case .retry: return true
        case .retryWithDelay(let delay):
            try await waitBeforeRetry(delay)
            return true
        }
    }

    /// Sleeps before a retry without holding a connection slot (another task may use it),
    /// and without the idle timeout running: waiting, as a server's `Retry-After` asked, is
    /// not idleness. The next hop takes a slot again.
    ///
    /// - Parameters:
    ///   - delay: How long to wait.
    ///   - announcing: What the retry does before it sleeps (its `willRetry` event, a
    ///     checkpoint), run once the idle timeout has stopped: on a starved machine that work
    ///     can take longer than the idle timeout, and it is not idleness either.
    func waitBeforeRetry(_ delay: Duration, announcing: () -> Void = {}) async throws {
        lease.release()
        let waiting = active.withLock { $0 }  // the task the watchdog reads
        waiting.client.setQueued(true)
        defer { waiting.client.setQueued(false) }
        announcing()
        try await Task.sleep(for: delay)
    }

    /// Waits out a retry the retry policy granted (a ``RetryBudget`` decision, in the
    /// download's, the in-order download's and the upload's machines alike): logs it,
    /// publishes `willRetry`, runs `alongside` (a checkpoint of what is on disk), and sleeps
    /// `delay` seconds as ``waitBeforeRetry(_:announcing:)`` does.
    func waitToRetry(
        attempt: Int,
        delay: TimeInterval,
        after error: FerryError,
        alongside: () -> Void = {}
    ) async throws {
        logger.debug("retrying", metadata: ["attempt": "\(attempt)", "delay": "\(delay)", "error": "\(error)"])
        try await waitBeforeRetry(.seconds(delay)) {
            origin.client.publish(.willRetry(attempt: attempt, delay: delay, error: error))
            alongside()
        }
    }
}
