import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOSSL
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The request loop: a request and its hops (redirects, challenges, the interceptor's
/// retries, a proxy's challenge), each waiting for its origin's connection slot.
extension Transfer {
    // MARK: Sending, with redirects

    /// Sends `request`, following redirects, and hands the final response to `consume`
    /// while its connection slot is held. Each hop waits for its origin's slot, held through
    /// `lease` (the transfer's own unless a segment of a split download brings its own).
    ///
    /// The ``RequestLoop`` decides every next step; this performs its actions.
    ///
    /// - Parameter offset: where `body` starts in what the task sends (a resumable upload's
    ///   append continues the upload there): when the loop sends the body again, the task's
    ///   count of bytes sent starts again from it.
    func send<Result: Sendable>(
        _ request: URLRequest,
        body: RequestBody?,
        sentFrom offset: Int64 = 0,
        lease: HostLimiter.Lease? = nil,
        consume: (ResponseBody, HTTPResponse) async throws -> Result
    ) async throws -> Result {
        let lease = lease ?? self.lease
        let interceptor = configuration.interceptor
        var loop = RequestLoop(
            request: try await adapt(request, with: interceptor),
            body: body,
            reason: origin.client.hasTransactions ? .resume : .initial,
            home: origin.originalRequest.url.map(Origin.init),
            intercepts: interceptor != nil,
            limits: RequestLoop.Limits(redirects: configuration.maximumRedirects)
        )
        var action = loop.start()
        while true {
            switch action {
            case .send(let hop):
                if hop.isRepeat, hop.body != nil { origin.client.resetSentBytes(to: offset) }
                announceRedirect(of: hop)
                switch try await send(hop, of: loop, lease: lease, consume: consume) {
                case .final(let result): return result
                case .event(let event): action = loop.next(after: event)
                }
            case .answerProxy(let challenge, let failures):
                let authorization = try await authenticateProxy(challenge, failures: failures)
                if let authorization { engine.setProxyAuthorization(authorization) }
                action = loop.next(after: .proxyAnswered(authorization != nil))
            case .askInterceptor(let request, let failure, let attempt):
                // Not holding a slot while the interceptor decides and the retry waits: a
                // token refresh may need a connection to this very host.
                lease.release()
                let decision =
                    await interceptor?.retry(request, for: session, dueTo: failure, attemptCount: attempt)
                    ?? .doNotRetry
                let adapted = try await prepareRetry(decision) ? try await adapt(request, with: interceptor) : nil
                action = loop.next(after: .interceptorDecided(adapted))
            case .deliver(let head, let buffered):
                return try await consume(ResponseBody(buffered: buffered), head)
            case .fail(let error):
                throw error
            }
        }
    }

    /// `hop`'s request as it goes out: with the cookie store's `Cookie` field for `url`
    /// (a redirect may lead where other cookies apply), unless the request set its own.
    func outgoingRequest(of hop: RequestLoop.Hop, in loop: RequestLoop, to url: URL) -> URLRequest {
        var request = hop.request
        guard let cookies = configuration.cookieStore, !loop.userCookies else { return request }
        // Setting a URLRequest field copies the request: only when something changes.
        let value = cookies.headerValue(for: url)
        if value != request.value(forHTTPHeaderField: "Cookie") {
            request.setValue(value, forHTTPHeaderField: "Cookie")
        }
        return request
    }

    /// Sends one hop while holding its origin's slot, records its metrics, and says what
    /// came of it; a failure is an event, not an error, so the loop can judge it.
    private func send<Result: Sendable>(
        _ hop: RequestLoop.Hop,
        of loop: RequestLoop,
        lease: HostLimiter.Lease,
        consume: (ResponseBody, HTTPResponse) async throws -> Result
    ) async throws -> HopOutcome<Result> {
        try await origin.client.waitWhilePaused()
        guard let url = hop.request.url else { throw FerryError(.invalidURL, "The request has no URL.") }
        var currentRequest = outgoingRequest(of: hop, in: loop, to: url)
        let spanned = telemetry?.startRequest(&currentRequest, reason: hop.reason)
        var responded = false
        var failure: FerryError?
        var transaction = TransactionMetrics(
            request: currentRequest,
            reason: hop.reason,
            fetchStartDate: Date(),
            countOfRequestBodyBytesSent: 0,
            countOfResponseBodyBytesReceived: 0
        )
        defer {
            transaction.responseEndDate = Date()
            transaction.countOfRequestBodyBytesSent = hop.body == nil ? 0 : origin.countOfBytesSent
            origin.client.record(transaction)
            if let spanned { telemetry?.endRequest(spanned, transaction: transaction, failure: failure) }
        }
        do {
            let destination = Origin(url)
            return try await lease.holding(destination) {
                origin.client.touch()
                transaction.requestStartDate = Date()
                sentRequest.withLock { $0 = currentRequest }
                logger.logHead(of: currentRequest)
                let response = try await exchange(
                    currentRequest,
                    body: hop.body,
                    connection: lease.connection,
                    origin: destination
                )
                responded = true
                transaction.responseStartDate = Date()
                transaction.requestEndDate = response.stream.requestSentAt ?? transaction.responseStartDate
                transaction.networkProtocolName = response.head.version.major >= 2 ? "h2" : "http/1.1"
                if let connection = response.connection { transaction.record(connection) }
                defer {
                    response.body.abandon()
                    transaction.countOfResponseBodyBytesReceived = response.body.bytesRead
                }
                origin.client.touch()
                let head = HTTPResponse(url: url, head: response.head)
                logger.logHead(of: head)
                try head.checkHeadLimits(configuration)
                configuration.cookieStore?.store(setCookieFields: head.headers.values(for: "Set-Cookie"), from: url)
                transaction.response = head
                var sent = hop
                sent.request = currentRequest
                return try await outcome(of: head, body: response.body, for: sent, of: loop, consume: consume)
            }
        } catch {
            let typed = ferryError(from: error)
            failure = typed
            return .event(.failed(error, typed, responded: responded, cancelled: Task.isCancelled))
        }
    }

    /// What one response means for the request: send it again with credentials, follow a
    /// redirect, let the interceptor judge an error status, or hand it to `consume`.
    private func outcome<Result: Sendable>(
        of head: HTTPResponse,
        body: ResponseBody,
        for hop: RequestLoop.Hop,
        of loop: RequestLoop,
        consume: (ResponseBody, HTTPResponse) async throws -> Result
    ) async throws -> HopOutcome<Result> {
        if let followUp = try await followUp(after: head, of: hop, in: loop) {
            await body.drain()
            return .event(.followUp(followUp))
        }
        // The interceptor is asked without the connection slot (a token refresh may need a
        // connection to this very host), so the body is read first.
        if loop.asksInterceptor(aboutStatus: head.statusCode) {
            return .event(
                .errorStatus(head, try await body.buffered(limit: configuration.maximumInMemoryBodySize, of: head))
            )
        }
        return .final(try await consume(body, head))
    }

    /// Whether `head` sends `hop` on: again with credentials (a `401` the session can
    /// answer), or to a redirect's target as the policy and delegate allow; `nil` when the
    /// response is the request's last. Shared by the request loop and the upgrade's own.
    ///
    /// - Throws: ``FerryError/Reason/bodyNotReplayable`` when credentials are asked for a
    ///   one-shot body; the authentication and redirect steps' errors.
    func followUp(
        after head: HTTPResponse,
        of hop: RequestLoop.Hop,
        in loop: RequestLoop
    ) async throws
        -> RequestLoop.FollowUp?
    {
        let url = hop.request.url?.absoluteString ?? ""
        if loop.answersChallenge,
            let retry = try await authenticate(
                hop.request,
                after: head,
                home: loop.home,
                failures: hop.challengesAnswered,
                userAuthorization: loop.userAuthorization
            )
        {
            guard hop.body?.isReplayable ?? true else {
                throw FerryError(
                    .bodyNotReplayable,
                    "The server asked for credentials, but the body is a one-shot stream and cannot be sent again.",
                    response: head
                )
            }
            logger.debug("answering an authentication challenge", metadata: ["url": "\(url)"])
            telemetry?.challenged(by: head)
            return .authenticate(retry)
        }
        if let next = try await redirect(for: hop.request, response: head, body: hop.body) {
            return .redirect(next.request, keepsBody: next.keepsBody, from: head)
        }
        return nil
    }

    /// Records the redirect `hop` follows, if it follows one, as it is sent: the task's
    /// current request, its `willRedirect` event, the span and the log. A redirect the loop
    /// refused is never recorded.
    func announceRedirect(of hop: RequestLoop.Hop) {
        guard let response = hop.redirectedBy else { return }
        origin.client.setCurrentRequest(hop.request, redirectedBy: response)
        telemetry?.redirected(by: response, to: hop.request.url)
        logger.debug(
            "redirect",
            metadata: [
                "from": "\(response.url.absoluteString)", "to": "\(hop.request.url?.absoluteString ?? "")",
            ]
        )
    }

}

extension HTTPResponse {
    /// Refuses a response head larger than `configuration` allows
    /// (``SessionConfiguration/maximumResponseHeaderCount``,
    /// ``SessionConfiguration/maximumResponseHeaderBytes``).
    func checkHeadLimits(_ configuration: SessionConfiguration) throws {
        let count = headers.fields.count
        let bytes = headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        guard count <= configuration.maximumResponseHeaderCount, bytes <= configuration.maximumResponseHeaderBytes
        else {
            throw FerryError(
                .badServerResponse,
                "The response head has \(count) fields and \(bytes) bytes; the limits are \(configuration.maximumResponseHeaderCount) fields and \(configuration.maximumResponseHeaderBytes) bytes.",
                response: self
            )
        }
    }
}

/// What one hop came to: the consumer's result, or an event for the request loop.
enum HopOutcome<Result: Sendable>: Sendable {
    case final(Result)
    case event(RequestLoop.Event)
}
