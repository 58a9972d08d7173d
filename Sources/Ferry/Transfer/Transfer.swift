import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOSSL
import Synchronization
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs one task's transfer: waits for a connection slot, sends the request, follows
/// redirects, and streams the body into memory or a partial file, under the session's idle
/// and resource timeouts.
///
/// One `Transfer` runs in one Swift task, made by ``SessionTask/resume()`` (through
/// ``LocalRunner``: at once, or when its slot in the per-host queue is granted); cancelling
/// that Swift task stops it. It reports to the task (progress, events) and ends by calling
/// ``SessionTask/transferDidFinish(error:outcome:)`` exactly once on every task it drove.
final class Transfer: TimeoutChecking {
    let session: Session
    let origin: SessionTask
    /// The task whose timing the watchdog reads: the data task, or the download it became.
    let active: Mutex<SessionTask>
    /// Why the transfer was stopped from inside (a timeout), which wins over the
    /// `CancellationError` the stop causes.
    let stopReason = Mutex<FerryError?>(nil)

    /// ``SessionConfiguration/logger``, with the task's identifier.
    let logger: Logger
    /// The task's settings, copied when the transfer started.
    let options: TransferOptions

    /// The transfer's slot in the per-host limit: first for the origin of the original
    /// request (its place in the queue taken when the task was resumed), then for each hop's.
    let lease: HostLimiter.Lease
    /// The bandwidth limits the transfer's bytes move under, if any.
    let throttle: Throttle?
    /// The task's metrics and spans; `nil` when the session records none.
    let telemetry: TaskTelemetry?

    init(task: SessionTask, session: Session, admission: HostLimiter.Reservation? = nil) {
        self.session = session
        self.origin = task
        self.active = Mutex(task)
        let options = TransferOptions(task: task, configuration: session.configuration)
        self.options = options
        self.lease = HostLimiter.Lease(session.engine.limiter, reservation: admission, priority: options.priority) {
            queued in
            task.client.setQueued(queued)
        }
        self.throttle = Throttle.make(task: task, shared: session.engine.rateLimiter)
        var logger = session.configuration.logger
        logger[metadataKey: "ferry-task"] = "\(task.taskIdentifier)"
        self.logger = logger
        // Made here, in the transfer's Swift task: its span's parent is the context of the
        // code that resumed the task.
        telemetry = TaskTelemetry(task: task, telemetry: session.telemetry)
        if let telemetry { task.client.telemetry = telemetry }
    }

    var configuration: SessionConfiguration { session.configuration }

    var engine: Engine { session.engine }
    /// The task this transfer was started for.
    var task: SessionTask { origin }

    /// Runs the transfer to its end. `late`: its Swift task was made only once it could
    /// start (it waited for its slot without one), so its resource timeout may be due
    /// already; then it ends with it before it sends anything. (Not the idle timeout: a
    /// Swift task may start seconds after it was made on a loaded machine, and that is no
    /// silence of the server's.)
    func run(late: Bool = false) async {
        let watchdog = engine.watchdog
        watchdog.watch(self)
        if late { checkTimeouts(idle: false) }
        let outcome: TaskOutcome?
        let failure: FerryError?
        do {
            outcome = try await inTaskSpan { try await admitted { try await perform() } }
            failure = nil
        } catch {
            outcome = nil
            failure = ferryError(from: error)
        }
        watchdog.unwatch(self)
        telemetry?.finish(error: failure)
        if let failure {
            logger.debug("task failed", metadata: ["error": "\(failure)"])
        } else {
            logger.debug("task completed")
        }
        origin.client.transferDidFinish(error: failure, outcome: outcome)
    }

    /// Runs `work` with the task's span as the current `ServiceContext` (when there is one),
    /// so that what it starts (the requests' spans) descends from it.
    private func inTaskSpan(_ work: () async throws -> TaskOutcome) async throws -> TaskOutcome {
        guard let context = telemetry?.context else { return try await work() }
        return try await ServiceContext.withValue(context) { try await work() }
    }

    /// Runs `work` once the task holds a slot for the origin of its original request: a task
    /// queued behind the per-host limit waits here, before it opens files or builds the deep
    /// frames of a transfer, so a thousand queued tasks cost little memory and no
    /// descriptors. The slot (or whichever the transfer holds by then) is given back however
    /// `work` ends.
    private func admitted(_ work: () async throws -> TaskOutcome) async throws -> TaskOutcome {
        defer { lease.release() }
        // The reservation was made for the original request's origin: not worked out again.
        if let first = lease.reservedOrigin ?? origin.originalRequest.url.map(Origin.init) {
            try await lease.hold(first)
        }
        // Stopped (cancelled, or a timeout came due) while it waited: nothing is sent.
        try Task.checkCancellation()
        return try await work()
    }

    /// The transfer sends nothing more (a download's body is in): its slot goes to the
    /// next task now, not after the flush, the decoding, the checksum, the delegate's turn
    /// with the file and the move. The transfer's lease is given back by the transfer alone:
    /// here, while it waits (``waitBeforeRetry(_:announcing:)``, an interceptor's decision)
    /// and when it ends.
    func stoppedSending() { lease.release() }

    // MARK: Timeouts

    /// Called by the session's ``Watchdog``: stops the transfer with a timeout error when no
    /// byte moved for the idle interval, or it ran past its resource interval. The stop is a
    /// cancellation of the transfer's Swift task; ``ferryError(from:)`` then reports the
    /// timeout, and a download keeps its bytes for a resume, as after any failure.
    func checkTimeouts() {
        checkTimeouts(idle: true)
    }

    /// ``checkTimeouts()``, the idle timeout left out when `idle` is `false`.
    private func checkTimeouts(idle checksIdle: Bool) {
        let idle = Duration.seconds(options.idleTimeout)
        let resource = Duration.seconds(configuration.timeoutIntervalForResource)
        let deadlines = active.withLock { $0 }.client.timeoutDeadlines(idle: idle, resource: resource)
        let now = ContinuousClock.now
        let timeout: FerryError
        if now >= deadlines.resource {
            timeout = FerryError(
                .timedOut(.resource),
                "The transfer took longer than \(configuration.timeoutIntervalForResource) s (timeoutIntervalForResource)."
            )
        } else if checksIdle, let idleDeadline = deadlines.idle, now >= idleDeadline {
            timeout = FerryError(
                .timedOut(.idle),
                "No data moved for \(options.idleTimeout) s (\(options.idleTimeoutSource))."
            )
        } else {
            return
        }
        let first = stopReason.withLock { reason -> Bool in
            defer { reason = reason ?? timeout }
            return reason == nil
        }
        if first { origin.client.interruptTransfer() }
    }

    private func perform() async throws -> TaskOutcome {
        switch origin.plan {
        case .download(let delivery, let resume):
            return try await Downloader(transfer: self).download(delivery: delivery, resume: resume)
        case .socket:
            throw FerryError(.unsupportedConfiguration, "A stream task has no HTTP transfer.")
        case .stream(let sink, let body):
            let request = origin.originalRequest
            return try await open(request, body: try body ?? RequestBody.of(request)).read { body, head in
                try await stream(body, head: head, to: sink)
            }
        case .data where Upgrader.leavesHTTP(origin.originalRequest):
            return try await Upgrader(transfer: self).upgrade(origin.originalRequest)
        case .data, .upload:
            let request = origin.originalRequest
            if case .data = origin.plan, let cache = configuration.responseCache,
                request.method == .get, request.httpBody == nil
            {
                return try await DataLoad(transfer: self).loadThroughCache(request, cache: cache)
            }
            let body = try initialBody(for: request)
            if case .upload = origin.plan, let body,
                Uploader.applies(to: request, body: body, policy: options.resumableUploads)
            {
                return try await Uploader(transfer: self).upload(request, body: body)
            }
            return try await open(request, body: body).read { body, head in
                try await DataLoad(transfer: self).consumeInMemory(body, head: head)
            }
        }
    }

    private func initialBody(for request: URLRequest) throws(FerryError) -> RequestBody? {
        if case .upload(let body) = origin.plan { return body }
        return try RequestBody.of(request)
    }

    // MARK: Errors

    /// The typed error for `error`. A timeout that stopped the transfer explains the
    /// cancellation it caused; an error that is already typed says the most (it may carry
    /// resume data) and is kept.
    func ferryError(from error: any Error) -> FerryError {
        if let error = error as? FerryError,
            error.resumeData != nil || error.uploadResumeData != nil || error.reason != .cancelled
        {
            return error
        }
        if let reason = stopReason.withLock({ $0 }) { return reason }
        return FerryError.mapping(error)
    }
}
