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

/// Runs one task's transfer: waits for a connection slot, sends the request, follows
/// redirects, and streams the body into memory or a partial file, under the session's idle
/// and resource timeouts.
///
/// One `Transfer` runs in one Swift task, created by ``SessionTask/resume()``; cancelling that
/// Swift task stops it. It reports to the task (progress, events) and ends by calling
/// ``SessionTask/transferDidFinish(error:outcome:)`` exactly once on every task it drove.
final class Transfer: Sendable {
    let session: Session
    let origin: SessionTask
    /// The task whose timing the watchdog reads: the data task, or the download it became.
    private let active: Mutex<SessionTask>
    /// Why the transfer was stopped from inside (a timeout), which wins over the
    /// `CancellationError` the stop causes.
    private let stopReason = Mutex<FerryError?>(nil)
    /// The request of the hop being answered, as it went out (with the credentials and
    /// cookies `send` added): what the cache judges a response by.
    let sentRequest = Mutex<URLRequest?>(nil)

    /// ``SessionConfiguration/logger``, with the task's identifier.
    let logger: Logger

    /// The task's place in its origin's admission queue, taken when it was resumed.
    private let admission: HostLimiter.Reservation?
    /// A download written in order (not stored for resuming) is decoded as a data task's
    /// body is; other downloads keep the bytes as sent.
    let decodesDownload = Atomic(false)

    init(task: SessionTask, session: Session, admission: HostLimiter.Reservation? = nil) {
        self.session = session
        self.origin = task
        self.active = Mutex(task)
        self.admission = admission
        var logger = session.configuration.logger
        logger[metadataKey: "ferry-task"] = "\(task.taskIdentifier)"
        self.logger = logger
    }

    var configuration: SessionConfiguration { session.configuration }
    private var engine: Engine { session.engine }
    /// The task this transfer was started for.
    var task: SessionTask { origin }

    func run() async {
        let watchdog = engine.watchdog
        watchdog.watch(self)
        let outcome: TaskOutcome?
        let failure: FerryError?
        do {
            outcome = try await admitted { try await perform() }
            failure = nil
        } catch {
            outcome = nil
            failure = ferryError(from: error)
        }
        watchdog.unwatch(self)
        if let failure {
            logger.debug("task failed", metadata: ["error": "\(failure)"])
        } else {
            logger.debug("task completed")
        }
        origin.transferDidFinish(error: failure, outcome: outcome)
    }

    /// Runs `work` once the task is admitted: a task queued behind the per-host limit waits
    /// here, before it opens files or builds the deep frames of a transfer, so a thousand
    /// queued tasks cost little memory and no descriptors. (Each request still takes a
    /// connection slot.)
    private func admitted(_ work: () async throws -> TaskOutcome) async throws -> TaskOutcome {
        guard let url = origin.originalRequest.url else { return try await work() }
        origin.setQueued(true)
        return try await engine.admission.withSlot(admission ?? engine.admission.reserve(for: Origin(url))) {
            origin.setQueued(false)
            return try await work()
        }
    }

    // MARK: Timeouts

    /// Called by the session's ``Watchdog``: stops the transfer with a timeout error when no
    /// byte moved for the idle interval, or it ran past its resource interval. The stop is a
    /// cancellation of the transfer's Swift task; ``ferryError(from:)`` then reports the
    /// timeout, and a download keeps its bytes for a resume, as after any failure.
    func checkTimeouts() {
        let idle = Duration.seconds(configuration.timeoutIntervalForRequest)
        let resource = Duration.seconds(configuration.timeoutIntervalForResource)
        let deadlines = active.withLock { $0 }.timeoutDeadlines(idle: idle, resource: resource)
        let now = ContinuousClock.now
        let timeout: FerryError
        if now >= deadlines.resource {
            timeout = FerryError(
                .timedOut(.resource),
                "The transfer took longer than \(configuration.timeoutIntervalForResource) s (timeoutIntervalForResource)."
            )
        } else if let idleDeadline = deadlines.idle, now >= idleDeadline {
            timeout = FerryError(
                .timedOut(.idle),
                "No data moved for \(configuration.timeoutIntervalForRequest) s (timeoutIntervalForRequest)."
            )
        } else {
            return
        }
        let first = stopReason.withLock { reason -> Bool in
            defer { reason = reason ?? timeout }
            return reason == nil
        }
        if first { origin.interruptTransfer() }
    }

    // MARK: Sending, with redirects

    private enum SendStep<Result: Sendable>: Sendable {
        case final(Result)
        case redirect(URLRequest, keepsBody: Bool)
        /// The same request again, now with credentials.
        case authenticate(URLRequest)
        /// A final response of 400 or more, its body read, for the interceptor to judge.
        case intercept(HTTPResponse, CircularBuffer<ByteBuffer>)
    }

    /// Sends `request`, following redirects, and hands the final response to `consume`
    /// while its connection slot is held. Each hop waits for its origin's slot.
    func send<Result: Sendable>(
        _ request: URLRequest,
        body: RequestBody?,
        consume: (ResponseBody, HTTPResponse) async throws -> Result
    ) async throws -> Result {
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
            origin.setQueued(true)
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
                step = try await engine.withSlot(for: Origin(url)) {
                    self.origin.setQueued(false)
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
                    engine.bridge?.setProxyAuthorization(authorization)
                    hops.answerProxyChallenge()
                    if hops.body != nil { origin.resetSentBytes() }
                    continue
                }
                // A request that failed before any response: the interceptor may send it again.
                let failure = ferryError(from: error)
                guard let interceptor, !responded, failure.reason != .cancelled, !Task.isCancelled,
                    currentBody?.isReplayable ?? true,
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
    private func nextStep<Result: Sendable>(
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
        if let retry = try await authenticate(
            request,
            after: head,
            home: home,
            failures: challengesAnswered,
            userAuthorization: userAuthorization
        ) {
            guard requestBody?.isReplayable ?? true else {
                throw FerryError(
                    .bodyNotReplayable,
                    "The server asked for credentials, but the body is a one-shot stream and cannot be sent again.",
                    response: head
                )
            }
            await drain(body)
            return .authenticate(retry)
        }
        if let next = try await redirect(for: request, response: head, body: requestBody, redirects: redirects) {
            await drain(body)
            origin.setCurrentRequest(next.request, redirectedBy: head)
            return .redirect(next.request, keepsBody: next.keepsBody)
        }
        // The interceptor is asked outside the connection slot (a token refresh may need a
        // connection to this very host), so the body is read first.
        if configuration.interceptor != nil, head.statusCode >= 400, requestBody?.isReplayable ?? true {
            return .intercept(head, try await bufferWhole(body, head: head))
        }
        return .final(try await consume(body, head))
    }

    /// Refuses a response head larger than the configuration allows.
    private func checkHeaderLimits(_ head: HTTPResponse) throws {
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

    /// `request` as the interceptor adapts it.
    private func adapt(_ request: URLRequest, with interceptor: (any RequestInterceptor)?) async throws -> URLRequest {
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
    private func prepareRetry(_ decision: RetryDecision) async throws -> Bool {
        switch decision {
        case .doNotRetry: return false
        case .retry: return true
        case .retryWithDelay(let delay):
            try await Task.sleep(for: delay)
            return true
        }
    }

    /// Every buffer of `body`, at most ``SessionConfiguration/maximumInMemoryBodySize`` bytes.
    private func bufferWhole(_ body: ResponseBody, head: HTTPResponse) async throws -> CircularBuffer<ByteBuffer> {
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

    private func perform() async throws -> TaskOutcome {
        switch origin.plan {
        case .download(let delivery, let resume):
            return try await download(delivery: delivery, resume: resume)
        case .data, .upload:
            let request = origin.originalRequest
            if case .data = origin.plan, let cache = configuration.responseCache,
                request.method == .get, request.httpBody == nil
            {
                return try await loadThroughCache(request, cache: cache)
            }
            return try await send(request, body: initialBody(for: request)) { body, head in
                try await consumeInMemory(body, head: head)
            }
        }
    }

    private func initialBody(for request: URLRequest) -> RequestBody? {
        if case .upload(let body) = origin.plan { return body }
        if let data = request.httpBody { return .data(data) }
        return nil
    }

    /// The request to send again with the session's credential, when `response` is a Basic
    /// challenge from the task's own origin that has not been answered yet.
    /// The request to follow a redirect with, or `nil` when `response` is final.
    private func redirect(
        for request: URLRequest,
        response: HTTPResponse,
        body: RequestBody?,
        redirects: Int
    ) async throws -> (request: URLRequest, keepsBody: Bool)? {
        let policy = origin.redirectPolicy ?? configuration.redirectPolicy
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
                    let answer = await session.askDelegate({
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
            guard redirects < configuration.maximumRedirects else {
                throw FerryError(
                    .redirectFailed,
                    "Stopped after \(configuration.maximumRedirects) redirects (maximumRedirects).",
                    response: response
                )
            }
            return (next, keepsBody)
        }
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

    /// Sends one request and waits for its response head, through ``ResponseStream`` (the
    /// event loop reads ahead); a body streams from ``CountingChunks`` through the stream's
    /// ``RequestBodyPump``, which ends it with its last byte.
    private func exchange(
        _ request: URLRequest,
        body: RequestBody?
    ) async throws -> Exchange {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false
        else {
            throw FerryError(.invalidURL, "'\(request.url?.absoluteString ?? "")' is not an http(s) URL with a host.")
        }
        let method = NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue)
        var headers = try headers(for: request)
        // Data and upload tasks may have their bodies decoded; downloads to files never: they
        // store the bytes as sent (`Transfer.request(_:for:)` asks for identity unless the
        // request names a coding itself).
        let decompressing: Bool
        if case .download = origin.plan {
            decompressing = decodesDownload.load(ordering: .relaxed)
        } else {
            decompressing = configuration.automaticDecompression
        }
        if decompressing, !headers.contains(name: "Accept-Encoding") {
            headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        }
        let route = try await engine.route(url)
        if let host = route.host, !headers.contains(name: "Host") { headers.add(name: "Host", value: host) }
        // A bridged request names itself, so the bridge can say which connection it took.
        let trace = route.bridged ? engine.bridge?.makeTrace() : nil
        if let trace { headers.replaceOrAdd(name: BridgeRelay.traceField, value: trace) }
        do {
            let client = engine.client(for: url, decompressing: decompressing, bridged: route.bridged)
            let tls = route.bridged ? nil : engine.tls.override(for: url)
            let (head, responseBody, stream) = try await exchange(
                method,
                headers,
                body,
                route: route,
                client: client,
                tls: tls
            )
            return Exchange(
                head: head,
                body: responseBody,
                stream: stream,
                connection: trace.flatMap { engine.bridge?.connection(for: $0) }
            )
        } catch {
            // A connection the TLS bridge refused reaches the client as a closed one.
            if route.bridged, let failure = engine.bridge?.failure(for: Origin(url)) { throw failure }
            throw error
        }
    }

    /// A response head, its body, and what is known of the way it came.
    private struct Exchange {
        var head: HTTPResponseHead
        var body: ResponseBody
        /// The stream the response came through, which knows when the request was sent.
        var stream: ResponseStream
        /// Set for requests that went through the bridge.
        var connection: BridgedConnection?
    }

    private func exchange(
        _ method: NIOHTTP1.HTTPMethod,
        _ headers: HTTPHeaders,
        _ body: RequestBody?,
        route: (url: URL, host: String?, bridged: Bool),
        client: HTTPClient,
        tls tlsConfiguration: TLSConfiguration?
    ) async throws -> (head: HTTPResponseHead, body: ResponseBody, stream: ResponseStream) {
        let task = origin
        let stream = ResponseStream(onActivity: { task.touch() })
        var requestBody: HTTPClient.Body?
        if let body {
            let chunks = CountingChunks(base: body.chunks(), task: task, length: body.length)
            let pump = stream.pump
            let eventLoop = client.eventLoopGroup.any()
            requestBody = .stream(contentLength: body.length) { writer in
                pump.start(chunks, length: body.length, writer: writer, on: eventLoop)
            }
        }
        stream.start(
            try HTTPClient.Request(
                url: route.url,
                method: method,
                headers: headers,
                body: requestBody,
                tlsConfiguration: tlsConfiguration
            ),
            on: client
        )
        do {
            return (try await stream.head(), ResponseBody(stream), stream)
        } catch {
            stream.abandon()
            throw error
        }
    }

    /// The request's header fields after the session's, without framing headers (the client
    /// sets those from the body); CR, LF and NUL are refused.
    private func headers(for request: URLRequest) throws -> HTTPHeaders {
        var headers = HTTPHeaders()
        let own = request.allHTTPHeaderFields ?? [:]
        let ownNames = Set(own.keys.map { $0.lowercased() })
        var fields: [(String, String)] = configuration.httpAdditionalHeaders
            .filter { !ownNames.contains($0.key.lowercased()) }
            .sorted { $0.key < $1.key }
            .map { ($0.key, $0.value) }
        fields += own.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        for (name, value) in fields {
            let lower = name.lowercased()
            if lower == "content-length" || lower == "transfer-encoding" { continue }
            guard Self.isValidHeader(name: name, value: value) else {
                throw FerryError(.invalidRequest, "The header '\(name)' has a name or value with CR, LF or NUL.")
            }
            headers.add(name: name, value: value)
        }
        return headers
    }

    static func isValidHeader(name: String, value: String) -> Bool {
        guard !name.isEmpty else { return false }
        let forbidden: Set<UInt8> = [0x0D, 0x0A, 0x00]
        if name.utf8.contains(where: { forbidden.contains($0) || $0 == 0x20 || $0 == UInt8(ascii: ":") }) {
            return false
        }
        return !value.utf8.contains(where: { forbidden.contains($0) })
    }

    // MARK: Bodies in memory

    /// A data or upload task's final response: announces it, asks the delegate what to do,
    /// then reads the body into memory (or hands it to a download).
    func consumeInMemory(_ body: ResponseBody, head: HTTPResponse) async throws -> TaskOutcome {
        origin.didReceive(response: head)
        if let delegate = session.delegate {
            let session = self.session
            let task = self.origin
            switch await session.askDelegate({ await delegate.session(session, task: task, didReceive: head) }) {
            case .allow:
                break
            case .cancel:
                throw FerryError(
                    .cancelledByDelegate,
                    "The delegate cancelled the task on its response.",
                    response: head
                )
            case .becomeDownload:
                return try await becomeDownload(body, head: head)
            }
        }
        return try await collect(body, head: head)
    }

    private func collect(_ body: ResponseBody, head: HTTPResponse) async throws -> TaskOutcome {
        let limit = configuration.maximumInMemoryBodySize
        let tooLarge = FerryError(
            .bodyTooLarge(limit: limit),
            "The response body is larger than \(limit) bytes (maximumInMemoryBodySize); use a download task.",
            response: head
        )
        if let expected = head.expectedContentLength, expected > limit { throw tooLarge }
        var data = Data()
        if let expected = head.expectedContentLength { data.reserveCapacity(Int(expected)) }
        var iterator = body.makeAsyncIterator()
        while true {
            try await origin.waitWhilePaused()
            guard let chunk = try await iterator.next() else { break }
            guard Int64(data.count + chunk.readableBytes) <= limit else { throw tooLarge }
            chunk.withUnsafeReadableBytes { bytes in
                data.append(contentsOf: bytes)
                origin.didReceive(data: bytes, publishData: true)
            }
        }
        guard origin.transferWillFinish() else { throw CancellationError() }
        return .data(data)
    }

    /// The data task's body continues in a new download task (disposition `.becomeDownload`).
    private func becomeDownload(_ body: ResponseBody, head: HTTPResponse) async throws -> TaskOutcome {
        guard let dataTask = origin as? DataTask else { return try await collect(body, head: head) }
        let download = try session.adoptDownload(from: dataTask, response: head)
        active.withLock { $0 = download }
        dataTask.publish(.becameDownload(download))
        if dataTask.transferWillFinish() {
            dataTask.transferDidFinish(error: nil, outcome: .becameDownload)
        }
        do {
            guard head.isSuccess else { throw await statusError(head, body: body) }
            let file = try PartialFile(in: configuration.downloadsDirectory)
            do {
                var writer = BodyWriter(
                    file: file,
                    task: download,
                    offset: 0,
                    skip: 0,
                    limit: head.expectedContentLength,
                    maximumFileSize: configuration.maximumFileSize
                )
                try await writer.write(body, checkpoint: nil)
                try file.finish()
            } catch {
                file.discard()
                throw error
            }
            guard download.transferWillFinish() else {
                file.discard()
                throw CancellationError()
            }
            let outcome = try await Self.deliver(file.url, head: head, task: download, delivery: .delegate)
            download.transferDidFinish(error: nil, outcome: outcome)
        } catch {
            download.transferDidFinish(error: ferryError(from: error), outcome: nil)
        }
        return .becameDownload
    }

    /// The error for a status a download does not accept; the first 64 KiB of its body are
    /// kept in the error, never written to a file.
    func statusError(_ head: HTTPResponse, body: ResponseBody) async -> FerryError {
        let prefix = try? await body.collect(upTo: 64 * 1024)
        return FerryError(
            .unacceptableStatusCode(head.statusCode),
            "\(head.url.absoluteString): HTTP \(head.statusCode)\(head.reasonPhrase.isEmpty ? "" : " " + head.reasonPhrase)",
            response: head,
            responseBodyPrefix: prefix.map { Data($0.readableBytesView) }
        )
    }

    /// Hands a finished file on as `delivery` says. `source`, the partial file Ferry wrote,
    /// is moved by its held directory and checked identity (see ``PartialFile``); without
    /// one (a file the daemon finished) the file is moved by its path.
    static func deliver(
        _ location: URL,
        head: HTTPResponse,
        task: SessionTask,
        delivery: DownloadDelivery,
        source: PartialFile? = nil
    )
        async throws -> TaskOutcome
    {
        switch delivery {
        case .handOver:
            task.publish(.finishedDownloading(location: location))
            return .file(location)
        case .delegate:
            await task.publishAndWaitForDelegate(.finishedDownloading(location: location))
            try? FileManager.default.removeItem(at: location)
            return .file(location)
        case .destination(let destination):
            task.publish(.finishedDownloading(location: location))
            do {
                let target = try destination.resolve(location, head)
                if let directories = destination.confinement, !PathConfinement.contains(directories, target) {
                    throw FerryError(
                        .fileSystem,
                        "'\(target.path)' no longer lies in a directory this download may write (a link changed since it was added): nothing was moved."
                    )
                }
                try FileSystem.moveFile(
                    from: source?.moveSource ?? FileSystem.MoveSource(location),
                    to: target,
                    createDirectories: destination.options.contains(.createIntermediateDirectories),
                    replace: destination.options.contains(.removePreviousFile)
                )
                task.publish(.movedDownload(to: target))
                return .file(target)
            } catch {
                if let source { source.discard() } else { try? FileManager.default.removeItem(at: location) }
                var failure =
                    (error as? FerryError) ?? FerryError(.fileSystem, "Cannot move the download.", underlying: error)
                failure.response = head
                task.publish(.failedToMoveDownload(failure))
                throw failure
            }
        }
    }

    // MARK: Errors

    /// The typed error for `error`. A timeout that stopped the transfer explains the
    /// cancellation it caused; an error that is already typed says the most (it may carry
    /// resume data) and is kept.
    func ferryError(from error: any Error) -> FerryError {
        if let error = error as? FerryError, error.resumeData != nil || error.reason != .cancelled { return error }
        if let reason = stopReason.withLock({ $0 }) { return reason }
        return Self.map(error)
    }

    static func map(_ error: any Error) -> FerryError {
        if let error = error as? FerryError { return error }
        if error is CancellationError { return .cancelled() }
        if let error = error as? HTTPClientError {
            switch error {
            case .cancelled: return .cancelled()
            case .invalidURL, .emptyHost, .emptyScheme:
                return FerryError(.invalidURL, "The URL is not valid.", underlying: error)
            case .bodyLengthMismatch:
                return FerryError(
                    .uploadBodyFailed,
                    "The request body did not match its declared length.",
                    underlying: error
                )
            case .readTimeout, .connectTimeout:
                return FerryError(.timedOut(.idle), "The connection timed out.", underlying: error)
            case .remoteConnectionClosed:
                return FerryError(
                    .network,
                    "The server closed the connection before the response was complete.",
                    underlying: error
                )
            default:
                return FerryError(.network, "The transfer failed.", underlying: error)
            }
        }
        if error is NIOHTTPDecompression.DecompressionError {
            return FerryError(
                .badServerResponse,
                "The compressed body inflates past maximumInMemoryBodySize, or is not valid gzip / deflate.",
                underlying: error
            )
        }
        if error is NIOSSLError || error is BoringSSLError {
            return FerryError(
                .secureConnectionFailed,
                "The TLS handshake failed: the server's certificate is not trusted for this host (or not the pinned one).",
                underlying: error
            )
        }
        if let challenge = error as? ProxyChallenge {
            return FerryError(
                .unacceptableStatusCode(407),
                "The proxy \(challenge.proxy.host):\(challenge.proxy.port) asks for credentials (407) that the session does not have or that it refused."
            )
        }
        if error is HTTPParserError {
            return FerryError(.badServerResponse, "The server's response is not valid HTTP.", underlying: error)
        }
        return FerryError(.network, "The connection failed.", underlying: error)
    }
}

/// A request body that reports each chunk to its task as the connection takes it.
struct CountingChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: ByteChunks
    let task: SessionTask
    /// The body's length when known: the client stops asking once it has that many bytes,
    /// so the last progress event goes out with the last chunk, not at the end of the
    /// sequence.
    var length: Int64?

    struct Iterator: AsyncIteratorProtocol {
        var base: ByteChunks.Iterator
        let task: SessionTask
        let length: Int64?
        var throttle = ProgressThrottle()
        var sent: Int64 = 0

        mutating func next() async throws -> ByteBuffer? {
            try await task.waitWhilePaused()
            if let chunk = try await base.next() {
                let count = Int64(chunk.readableBytes)
                sent += count
                var due = throttle.add(count)
                if due == nil, let length, sent >= length { due = throttle.flush() }
                task.didSend(bytes: count, publish: due != nil, unpublished: due ?? 0)
                return chunk
            }
            if let rest = throttle.flush() { task.didSend(bytes: 0, publish: true, unpublished: rest) }
            return nil
        }
    }

    func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), task: task, length: length) }
}
