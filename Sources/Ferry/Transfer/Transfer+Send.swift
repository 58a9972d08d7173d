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

    enum SendStep<Result: Sendable>: Sendable {
        case final(Result)
        case redirect(URLRequest, keepsBody: Bool)
        /// The same request again, now with credentials.
        case authenticate(URLRequest)
        /// A final response of 400 or more, its body read, for the interceptor to judge.
        case intercept(HTTPResponse, CircularBuffer<ByteBuffer>)
    }

    /// Sends `request`, following redirects, and hands the final response to `consume`
    /// while its connection slot is held. Each hop waits for its origin's slot, held through
    /// `lease` (the transfer's own unless a segment of a split download brings its own).
    func send<Result: Sendable>(
        _ request: URLRequest,
        body: RequestBody?,
        lease: HostLimiter.Lease? = nil,
        consume: (ResponseBody, HTTPResponse) async throws -> Result
    ) async throws -> Result {
        let lease = lease ?? self.lease
        let interceptor = configuration.interceptor
        var hops = Hops(
            request: try await adapt(request, with: interceptor),
            body: body,
            reason: origin.hasTransactions ? .resume : .initial
        )
        let userAuthorization = hops.request.value(forHTTPHeaderField: "Authorization") != nil
        let userCookies = hops.request.value(forHTTPHeaderField: "Cookie") != nil
        // The origin the session's credential was given for: the task's own, also for a
        // retry that starts at a later hop.
        let home = origin.originalRequest.url.map(Origin.init)
        while true {
            try await origin.waitWhilePaused()
            guard let url = hops.request.url else { throw FerryError(.invalidURL, "The request has no URL.") }
            // The store's cookies for this hop (a redirect may lead where others apply).
            // (Setting a URLRequest field copies the request: only when something changes.)
            if let cookies = configuration.cookieStore, !userCookies {
                let value = cookies.headerValue(for: url)
                if value != hops.request.value(forHTTPHeaderField: "Cookie") {
                    hops.request.setValue(value, forHTTPHeaderField: "Cookie")
                }
            }
            let currentRequest = hops.request
            let currentBody = hops.body
            let challengesAnswered = hops.challengesAnswered
            let redirects = hops.redirects
            var responded = false
            var transaction = TransactionMetrics(
                request: currentRequest,
                reason: hops.reason,
                fetchStartDate: Date(),
                countOfRequestBodyBytesSent: 0,
                countOfResponseBodyBytesReceived: 0
            )
            defer {
                transaction.responseEndDate = Date()
                transaction.countOfRequestBodyBytesSent = currentBody == nil ? 0 : origin.countOfBytesSent
                origin.record(transaction)
            }
            let step: SendStep<Result>
            do {
                step = try await lease.holding(Origin(url)) {
                    origin.touch()
                    transaction.requestStartDate = Date()
                    sentRequest.withLock { $0 = currentRequest }
                    logRequest(currentRequest)
                    let response = try await exchange(currentRequest, body: currentBody)
                    responded = true
                    transaction.responseStartDate = Date()
                    transaction.requestEndDate = response.stream.requestSentAt ?? transaction.responseStartDate
                    transaction.networkProtocolName = response.head.version.major >= 2 ? "h2" : "http/1.1"
                    if let connection = response.connection { transaction.record(connection) }
                    defer {
                        response.body.abandon()
                        transaction.countOfResponseBodyBytesReceived = response.body.bytesRead
                    }
                    origin.touch()
                    let head = HTTPResponse(url: url, head: response.head)
                    logResponse(head)
                    try checkHeaderLimits(head)
                    configuration.cookieStore?.store(setCookieFields: head.headers.values(for: "Set-Cookie"), from: url)
                    transaction.response = head
                    return try await nextStep(
                        after: head,
                        body: response.body,
                        request: currentRequest,
                        requestBody: currentBody,
                        home: home,
                        redirects: redirects,
                        challengesAnswered: challengesAnswered,
                        userAuthorization: userAuthorization,
                        consume: consume
                    )
                }
            } catch {
                // The proxy asked for credentials before the request could go: answer, then send
                // the same request again.
                if let challenge = error as? ProxyChallenge, !responded, currentBody?.isReplayable ?? true,
                    let authorization = try await authenticateProxy(
                        challenge,
                        failures: hops.proxyChallengesAnswered
                    )
                {
                    engine.setProxyAuthorization(authorization)
                    hops.answerProxyChallenge()
                    if hops.body != nil { origin.resetSentBytes() }
                    continue
                }
                // A request that failed before any response: the interceptor may send it again.
                let failure = ferryError(from: error)
                guard let interceptor, !responded, failure.reason != .cancelled, !Task.isCancelled,
                    currentBody?.isReplayable ?? true
                else { throw error }
                // Not holding a slot while the interceptor decides and the retry waits.
                lease.release()
                guard
                    try await prepareRetry(
                        await interceptor.retry(
                            currentRequest,
                            for: session,
                            dueTo: .error(failure),
                            attemptCount: hops.interceptorRetries
                        )
                    )
                else { throw error }
                hops.retry(with: try await adapt(currentRequest, with: interceptor))
                if hops.body != nil { origin.resetSentBytes() }
                continue
            }
            switch step {
            case .final(let result):
                return result
            case .redirect(let next, let keepsBody):
                logger.debug(
                    "redirect",
                    metadata: ["from": "\(url.absoluteString)", "to": "\(next.url?.absoluteString ?? "")"]
                )
                try hops.redirect(to: next, keepsBody: keepsBody)
            case .authenticate(let retry):
                logger.debug("answering an authentication challenge", metadata: ["url": "\(url.absoluteString)"])
                hops.answerChallenge(with: retry)
            case .intercept(let head, let buffered):
                // A token refresh may need a connection to this very host.
                lease.release()
                let decision = await interceptor?.retry(
                    currentRequest,
                    for: session,
                    dueTo: .response(head),
                    attemptCount: hops.interceptorRetries
                )
                guard try await prepareRetry(decision ?? .doNotRetry) else {
                    return try await consume(ResponseBody(buffered: buffered), head)
                }
                hops.retry(with: try await adapt(currentRequest, with: interceptor))
            }
            if hops.body != nil { origin.resetSentBytes() }
        }
    }

    /// What one response means for the request: send it again with credentials, follow a
    /// redirect, let the interceptor judge an error status, or hand it to `consume`.
    func nextStep<Result: Sendable>(
        after head: HTTPResponse,
        body: ResponseBody,
        request: URLRequest,
        requestBody: RequestBody?,
        home: Origin?,
        redirects: Int,
        challengesAnswered: Int,
        userAuthorization: Bool,
        consume: (ResponseBody, HTTPResponse) async throws -> Result
    ) async throws -> SendStep<Result> {
        if let followUp = try await followUp(
            after: head,
            of: request,
            body: requestBody,
            home: home,
            redirects: redirects,
            challengesAnswered: challengesAnswered,
            userAuthorization: userAuthorization
        ) {
            await drain(body)
            switch followUp {
            case .authenticate(let retry): return .authenticate(retry)
            case .redirect(let next, let keepsBody): return .redirect(next, keepsBody: keepsBody)
            }
        }
        // The interceptor is asked without the connection slot (a token refresh may need a
        // connection to this very host), so the body is read first.
        if configuration.interceptor != nil, head.statusCode >= 400, requestBody?.isReplayable ?? true {
            return .intercept(head, try await bufferWhole(body, head: head))
        }
        return .final(try await consume(body, head))
    }

    /// Where a response sends its request next, when it is not the request's last.
    enum FollowUp {
        /// The same request again, with credentials.
        case authenticate(URLRequest)
        /// A redirect's target (the task's current request already).
        case redirect(URLRequest, keepsBody: Bool)
    }

    /// Whether `head` sends `request` on: again with credentials (a `401` the session can
    /// answer), or to a redirect's target as the policy and delegate allow; `nil` when the
    /// response is the request's last. Shared by the request loop and the upgrade's own.
    ///
    /// - Throws: ``FerryError/Reason/bodyNotReplayable`` when credentials are asked for a
    ///   one-shot body; the authentication and redirect steps' errors.
    func followUp(
        after head: HTTPResponse,
        of request: URLRequest,
        body: RequestBody?,
        home: Origin?,
        redirects: Int,
        challengesAnswered: Int,
        userAuthorization: Bool
    ) async throws -> FollowUp? {
        if let retry = try await authenticate(
            request,
            after: head,
            home: home,
            failures: challengesAnswered,
            userAuthorization: userAuthorization
        ) {
            guard body?.isReplayable ?? true else {
                throw FerryError(
                    .bodyNotReplayable,
                    "The server asked for credentials, but the body is a one-shot stream and cannot be sent again.",
                    response: head
                )
            }
            return .authenticate(retry)
        }
        if let next = try await redirect(for: request, response: head, body: body, redirects: redirects) {
            origin.setCurrentRequest(next.request, redirectedBy: head)
            return .redirect(next.request, keepsBody: next.keepsBody)
        }
        return nil
    }

    /// Refuses a response head larger than the configuration allows.
    func checkHeaderLimits(_ head: HTTPResponse) throws {
        let count = head.headers.fields.count
        let bytes = head.headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
        guard count <= configuration.maximumResponseHeaderCount, bytes <= configuration.maximumResponseHeaderBytes
        else {
            throw FerryError(
                .badServerResponse,
                "The response head has \(count) fields and \(bytes) bytes; the limits are \(configuration.maximumResponseHeaderCount) fields and \(configuration.maximumResponseHeaderBytes) bytes.",
                response: head
            )
        }
    }

    /// Every buffer of `body`, at most ``SessionConfiguration/maximumInMemoryBodySize`` bytes.
    func bufferWhole(_ body: ResponseBody, head: HTTPResponse) async throws -> CircularBuffer<ByteBuffer> {
        let limit = configuration.maximumInMemoryBodySize
        var buffers = CircularBuffer<ByteBuffer>()
        var total: Int64 = 0
        for try await buffer in body {
            total += Int64(buffer.readableBytes)
            guard total <= limit else {
                throw FerryError(
                    .bodyTooLarge(limit: limit),
                    "The error response is larger than \(limit) bytes (maximumInMemoryBodySize).",
                    response: head
                )
            }
            buffers.append(buffer)
        }
        return buffers
    }

    /// Reads a little of a body nobody wants, so its connection can be reused; a large one
    /// is abandoned (the connection is closed instead).
    func drain(_ body: ResponseBody) async {
        var remaining = 64 * 1024
        do {
            for try await chunk in body {
                remaining -= chunk.readableBytes
                if remaining < 0 { break }
            }
        } catch {}
    }
}
