import Synchronization

#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking
#else
public import Foundation
#endif

/// Puts a credential on requests and refreshes it when the server refuses it: what an
/// ``AuthenticationInterceptor`` needs to know about one kind of credential (an OAuth token,
/// an API session).
public protocol Authenticator: Sendable {
    /// What the authenticator applies and refreshes, such as an OAuth token.
    associatedtype Credential: Sendable & Equatable

    /// Adds `credential` to `request` (for example `Authorization: Bearer …`).
    func apply(_ credential: Credential, to request: inout URLRequest)

    /// A fresh credential in place of `credential`. Called once for all the requests that
    /// were refused with the same credential, however many there are.
    func refresh(_ credential: Credential, for session: Session) async throws -> Credential

    /// Whether `response` to `request` means the credential was refused. Default: `401`.
    func didRequest(_ request: URLRequest, with response: HTTPResponse) -> Bool

    /// Whether `request` carried `credential` (so a refusal of it calls for a refresh; a
    /// request that carried an older one is just sent again).
    func isRequest(_ request: URLRequest, authenticatedWith credential: Credential) -> Bool
}

extension Authenticator {
    public func didRequest(_ request: URLRequest, with response: HTTPResponse) -> Bool {
        response.statusCode == 401
    }
}

/// A ``RequestInterceptor`` that authenticates every request with its ``Authenticator``'s
/// credential and, when the server refuses it, refreshes it once for every waiting request
/// (Alamofire's `AuthenticationInterceptor`).
///
/// While a refresh runs, new requests wait for it and go out with the new credential;
/// requests refused with the old one are sent again once it is there. A refresh that fails
/// leaves the refused responses as they are. At most ``maximumRetries`` retries per task.
///
/// ```swift
/// let interceptor = AuthenticationInterceptor(authenticator: OAuth(), credential: token)
/// configuration.interceptor = interceptor
/// ```
public final class AuthenticationInterceptor<A: Authenticator>: RequestInterceptor {
    private struct State: Sendable {
        var credential: A.Credential?
        var refreshing: Task<A.Credential, any Error>?
    }

    private let authenticator: A
    private let state: Mutex<State>
    /// Retries per task before a refusal is delivered as it is.
    public let maximumRetries: Int

    /// An interceptor that applies `credential` with `authenticator`, refreshing it at most `maximumRetries` times in a row.
    public init(authenticator: A, credential: A.Credential? = nil, maximumRetries: Int = 3) {
        self.authenticator = authenticator
        self.state = Mutex(State(credential: credential))
        self.maximumRetries = maximumRetries
    }

    /// The credential requests get now.
    public var credential: A.Credential? {
        get { state.withLock { $0.credential } }
        set { state.withLock { $0.credential = newValue } }
    }

    public func adapt(_ request: URLRequest, for session: Session) async throws -> URLRequest {
        let (credential, refreshing) = state.withLock { ($0.credential, $0.refreshing) }
        var current = credential
        if let refreshing, let fresh = try? await refreshing.value { current = fresh }
        var request = request
        if let current { authenticator.apply(current, to: &request) }
        return request
    }

    public func retry(
        _ request: URLRequest,
        for session: Session,
        dueTo failure: RequestFailure,
        attemptCount: Int
    ) async -> RetryDecision {
        guard case .response(let response) = failure, attemptCount < maximumRetries,
            authenticator.didRequest(request, with: response)
        else { return .doNotRetry }
        let refresh: Task<A.Credential, any Error>? = state.withLock { state in
            if let running = state.refreshing { return running }
            guard let credential = state.credential,
                authenticator.isRequest(request, authenticatedWith: credential)
            else {
                // Refused with an older credential: the current one may well work.
                return nil
            }
            let authenticator = self.authenticator
            // The task records its own result, under the lock that stored it.
            let task = Task {
                do {
                    let fresh = try await authenticator.refresh(credential, for: session)
                    self.finishRefresh(with: fresh)
                    return fresh
                } catch {
                    self.finishRefresh(with: nil)
                    throw error
                }
            }
            state.refreshing = task
            return task
        }
        guard let refresh else { return credential == nil ? .doNotRetry : .retry }
        do {
            _ = try await refresh.value
            return .retry
        } catch {
            return .doNotRetry
        }
    }

    private func finishRefresh(with fresh: A.Credential?) {
        state.withLock { state in
            if let fresh { state.credential = fresh }
            state.refreshing = nil
        }
    }
}
