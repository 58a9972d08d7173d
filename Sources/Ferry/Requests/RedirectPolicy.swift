import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What a task does with a redirect (3xx with `Location`): follow it, refuse it, or change it.
///
/// Set a session-wide default on ``SessionConfiguration/redirectPolicy`` and override it per
/// task with ``SessionTask/redirectPolicy`` before `resume()`. A refused redirect completes
/// the task with the 3xx response itself, as URLSession does when its delegate answers `nil`.
///
/// ```swift
/// task.redirectPolicy = .modify { response, proposed in
///     proposed.url?.host == "cdn.example.com" ? proposed : nil
/// }
/// ```
public struct RedirectPolicy: Sendable {
    enum Kind: Sendable {
        case follow
        case refuse
        case modify(@Sendable (HTTPResponse, URLRequest) -> URLRequest?)
    }

    let kind: Kind

    /// Follows every redirect, up to ``SessionConfiguration/maximumRedirects``.
    public static let follow = RedirectPolicy(kind: .follow)
    /// Never follows: the 3xx response is the task's response.
    public static let refuse = RedirectPolicy(kind: .refuse)

    /// Asks `transform` for the request to send instead; `nil` refuses the redirect.
    ///
    /// - Parameter transform: Gets the redirect response and the request Ferry would send
    ///   (method and body already rewritten per RFC 9110 §15.4).
    public static func modify(
        _ transform:
            @escaping @Sendable (_ response: HTTPResponse, _ proposed: URLRequest) ->
            URLRequest?
    ) -> RedirectPolicy {
        RedirectPolicy(kind: .modify(transform))
    }

    func apply(response: HTTPResponse, proposed: URLRequest) -> URLRequest? {
        switch kind {
        case .follow: proposed
        case .refuse: nil
        case .modify(let transform): transform(response, proposed)
        }
    }
}
