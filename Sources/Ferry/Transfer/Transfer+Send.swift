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

    /// Sends `request`, following redirects, answering challenges and letting the
    /// interceptor retry, and returns the final response with its body still to be read on
    /// the connection. Each hop waits for its origin's slot, held through `lease` (the
    /// transfer's own unless a segment of a split download brings its own); the slot stays
    /// held after the return, while the caller reads the body.
    ///
    /// The ``RequestLoop`` decides every next step; this performs its actions. The caller
    /// reads the body and feeds what it finds to its own machine, then closes the response
    /// (``FinalResponse/close(failure:)``): nothing here calls back into it.
    ///
    /// - Parameters:
    ///   - offset: where `body` starts in what the task sends (a resumable upload's append
    ///     continues the upload there): when the loop sends the body again, the task's count
    ///     of bytes sent starts again from it.
    ///   - decodesDownload: whether a download's body is asked for coded and decoded, as a
    ///     data task's is (a download written in order, never stored for resuming, with
    ///     ``SessionConfiguration/automaticDecompression``); other downloads keep the bytes
    ///     as sent.
    func open(
        _ request: URLRequest,
        body: RequestBody?,
        sentFrom offset: Int64 = 0,
        lease: HostLimiter.Lease? = nil,
        decodesDownload: Bool = false
    ) async throws -> FinalResponse {
        let lease = lease ?? self.lease
        let interceptor = configuration.interceptor
        let loop = RequestLoop(
            request: try await adapt(request, with: interceptor),
            body: body,
            reason: origin.client.hasTransactions ? .resume : .initial,
            home: origin.originalRequest.url.map(Origin.init),
            intercepts: interceptor != nil,
            limits: RequestLoop.Limits(redirects: configuration.maximumRedirects)
        )
        // The last hop as it went out: an error response the interceptor declined is
        // delivered after its hop.
        var sent = loop.current.request
        return try await drive(loop, lease: lease, sentFrom: offset) { hop, loop in
            try await send(hop, of: loop, lease: lease, decodesDownload: decodesDownload, sent: &sent)
        } deliver: { head, buffered in
            // Its hop ended as its body was buffered for the interceptor.
            FinalResponse(head: head, body: ResponseBody(buffered: buffered), request: sent, ending: nil)
        }
    }

    /// Runs `loop` to its end, the one driver of every ``RequestLoop``: it sends each hop
    /// with `send` (which says what came of it), answers the proxy's challenges, asks the
    /// interceptor (without the connection slot) and returns the final answer `send` or
    /// `deliver` made, or throws the loop's error. The request loop's decisions, redirects
    /// and challenges and retries and their caps, are the loop's alone; the drivers differ
    /// only in how a hop goes out: ``open(_:body:sentFrom:lease:decodesDownload:)``
    /// through the engine, ``Upgrader`` on a connection of its own per hop.
    ///
    /// - Parameters:
    ///   - loop: The loop, not started yet.
    ///   - lease: The slot given back while the interceptor decides.
    ///   - offset: Where the body starts in what the task sends: a hop that sends the body
    ///     again starts the task's count of bytes sent there.
    ///   - send: Sends one hop of the loop; returns the final answer, or the event for the
    ///     loop (a failure the loop judges is an event, not an error).
    ///   - deliver: The final answer for an error response the interceptor declined, its
    ///     body buffered.
    func drive<Final: ~Copyable>(
        _ loop: RequestLoop,
        lease: HostLimiter.Lease,
        sentFrom offset: Int64,
        send: (RequestLoop.Hop, RequestLoop) async throws -> HopOutcome<Final>,
        deliver: (HTTPResponse, CircularBuffer<ByteBuffer>) throws -> Final
    ) async throws -> Final {
        var loop = loop
        let interceptor = configuration.interceptor
        var action = loop.start()
        while true {
            switch action {
            case .send(let hop):
                if hop.isRepeat, hop.body != nil { origin.client.resetSentBytes(to: offset) }
                // The redirect this hop follows, recorded as it is sent (a refused one never
                // is): the task's current request, its `willRedirect` event, the span, the log.
                if let response = hop.redirectedBy {
                    origin.client.setCurrentRequest(hop.request, redirectedBy: response)
                    telemetry?.redirected(by: response, to: hop.request.url)
                    logger.debug(
                        "redirect",
                        metadata: [
                            "from": "\(response.url.absoluteString)",
                            "to": "\(hop.request.url?.absoluteString ?? "")",
                        ]
                    )
                }
                let outcome = try await send(hop, loop)
                switch consume outcome {
                case .final(let answer): return answer
                case .event(let event): action = loop.next(after: event)
                }
            case .answerProxy(let challenge, let failures):
                // Nothing of the body has gone: the same request is sent again.
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
                return try deliver(head, buffered)
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

    /// Sends one hop while holding its origin's slot and says what came of it: the final
    /// response, its hop's metrics still open, or an event for the loop (a failure is an
    /// event, not an error, so the loop can judge it), its hop's metrics recorded.
    private func send(
        _ hop: RequestLoop.Hop,
        of loop: RequestLoop,
        lease: HostLimiter.Lease,
        decodesDownload: Bool,
        sent: inout URLRequest
    ) async throws -> HopOutcome<FinalResponse> {
        try await origin.client.waitWhilePaused()
        guard let url = hop.request.url else { throw FerryError(.invalidURL, "The request has no URL.") }
        var currentRequest = outgoingRequest(of: hop, in: loop, to: url)
        let span = telemetry?.startRequest(&currentRequest, reason: hop.reason)
        var ending = HopEnding(
            transfer: self,
            transaction: TransactionMetrics(
                request: currentRequest,
                reason: hop.reason,
                fetchStartDate: Date(),
                countOfRequestBodyBytesSent: 0,
                countOfResponseBodyBytesReceived: 0
            ),
            span: span,
            sendsBody: hop.body != nil
        )
        let destination = Origin(url)
        let response: Engine.Exchange
        var handed = false
        do {
            try await lease.hold(destination)
            origin.client.touch()
            ending.transaction.requestStartDate = Date()
            sent = currentRequest
            handed = true
            response = try await exchange(
                currentRequest,
                body: hop.body,
                connection: lease.connection,
                origin: destination,
                decodesDownload: decodesDownload
            )
        } catch {
            // No answer says which version it went over: the head as the request has it.
            if handed { logger.logHead(of: currentRequest) }
            let typed = ferryError(from: error)
            ending.end(bodyBytesReceived: 0, failure: typed)
            return .event(.failed(error, typed, responded: false, cancelled: Task.isCancelled))
        }
        // Logged once the answer's head says which version it went over (the same as the
        // connection's), with the fields as sent.
        logger.logHead(of: currentRequest, sentAs: response)
        origin.client.touch()
        let head = HTTPResponse(url: url, head: response.head)
        ending.transaction.responseStartDate = Date()
        ending.transaction.requestEndDate = response.stream.requestSentAt ?? ending.transaction.responseStartDate
        ending.transaction.networkProtocolName = response.head.version.major >= 2 ? "h2" : "http/1.1"
        if let connection = response.connection { ending.transaction.record(connection) }
        logger.logHead(of: head)
        do {
            try head.checkHeadLimits(configuration)
        } catch {
            // A head refused by its size is no response: its metrics record none.
            let typed = ferryError(from: error)
            response.body.abandon()
            ending.end(bodyBytesReceived: response.body.bytesRead, failure: typed)
            return .event(.failed(error, typed, responded: true, cancelled: Task.isCancelled))
        }
        configuration.cookieStore?.store(setCookieFields: head.headers.values(for: "Set-Cookie"), from: url)
        ending.transaction.response = head
        let final = FinalResponse(head: head, body: response.body, request: currentRequest, ending: ending)
        do {
            var answered = hop
            answered.request = currentRequest
            if let followUp = try await followUp(after: head, of: answered, in: loop) {
                await final.body.drain()
                final.close()
                return .event(.followUp(followUp))
            }
            // The interceptor is asked without the connection slot (a token refresh may need
            // a connection to this very host), so the body is read first.
            if loop.asksInterceptor(aboutStatus: head.statusCode) {
                let buffered = try await final.body.buffered(limit: configuration.maximumInMemoryBodySize, of: head)
                final.close()
                return .event(.errorStatus(head, buffered))
            }
            return .final(final)
        } catch {
            let typed = ferryError(from: error)
            final.close(failure: typed)
            return .event(.failed(error, typed, responded: true, cancelled: Task.isCancelled))
        }
    }

    /// Whether `head` sends `hop` on: again with credentials (a `401` the session can
    /// answer), or to a redirect's target as the policy and delegate allow; `nil` when the
    /// response is the request's last. Shared by both hop senders (the engine's and the upgrade's).
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

/// What one hop came to: the final answer (a response still to be read, or what an upgrade
/// became), or an event for the request loop.
enum HopOutcome<Final: ~Copyable>: ~Copyable {
    case final(Final)
    case event(RequestLoop.Event)
}
