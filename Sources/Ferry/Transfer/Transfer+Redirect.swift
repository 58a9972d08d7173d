import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The redirect policy of the request loop: RFC 9110's rules (``RedirectPlan``), then the
/// task's or session's ``RedirectPolicy``, then the delegate. The limit on redirects is the
/// loop's (``RequestLoop/Limits``).
extension Transfer {
    /// The request to follow a redirect with, or `nil` when `response` is final.
    func redirect(
        for request: URLRequest,
        response: HTTPResponse,
        body: RequestBody?
    ) async throws -> (request: URLRequest, keepsBody: Bool)? {
        let policy = options.redirectPolicy
        if case .refuse = policy.kind { return nil }
        let plan = RedirectPlan.make(
            for: request,
            response: response,
            bodyIsReplayable: body?.isReplayable ?? true,
            hasBody: body != nil,
            allowsInsecure: configuration.allowsInsecureRedirects
        )
        switch plan {
        case .notARedirect:
            return nil
        case .fail(let error):
            throw error
        case .follow(let proposed, let keepsBody):
            guard var next = policy.apply(response: response, proposed: proposed) else { return nil }
            if let delegate = session.delegate {
                let session = self.session
                let task = self.origin
                let candidate = next
                guard
                    let answer = await session.hub.ask({
                        await delegate.session(
                            session,
                            task: task,
                            willPerformRedirection: response,
                            newRequest: candidate
                        )
                    })
                else { return nil }
                next = answer
            }
            return (next, keepsBody)
        }
    }
}
