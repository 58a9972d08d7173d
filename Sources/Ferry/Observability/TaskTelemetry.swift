import CoreMetrics
import Foundation
import Synchronization
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One task's metrics and spans: a span for the task, a child span for each request (each
/// hop, retry, segment and resume), events on the task's span for redirects, challenges,
/// retries, resumes and checkpoints, and the counters and timers of ``Telemetry/Label``.
///
/// Span attributes follow OpenTelemetry's HTTP client conventions: `http.request.method`,
/// `server.address`, `server.port`, `url.full` (redacted, ``Telemetry/redacted(_:)``),
/// `url.scheme`, `http.response.status_code`, `http.request.resend_count`,
/// `network.protocol.version`, `error.type`.
///
/// ## Lifecycle and threading
/// Made by a task's transfer when it starts, in the transfer's Swift task, and only when the
/// session's ``Telemetry`` is active. That Swift task was created by `resume()` and inherits
/// its caller's task-locals, so the task span's parent is the caller's `ServiceContext`.
/// Every member may be called from any thread and concurrently (a segmented download's
/// requests run at once); ``finish(error:)`` ends the task span, once.
final class TaskTelemetry: Sendable {
    private let metrics: (any MetricsFactory)?
    private let tracer: (any Tracer)?
    /// The task's span, parent of its requests' spans; `nil` without a tracer.
    private let span: (any Span)?
    /// `data`, `download`, `upload` or `stream`: a dimension of every metric.
    private let kind: String
    private let started = ContinuousClock.now
    /// Requests started so far: each after the first is a resend in OpenTelemetry's terms.
    private let requests = Atomic<Int>(0)
    private let finished = Atomic<Bool>(false)

    /// `nil` when the session records nothing.
    init?(task: SessionTask, telemetry: Telemetry) {
        guard telemetry.isActive else { return nil }
        metrics = telemetry.metrics
        tracer = telemetry.tracer
        let kind = Self.kind(of: task.plan)
        self.kind = kind
        let request = task.originalRequest
        span = telemetry.tracer.map { tracer in
            let span = tracer.startSpan(
                "\(Self.method(of: request)) \(kind)",
                context: ServiceContext.current ?? .topLevel,
                ofKind: .internal
            )
            span.attributes["ferry.task.kind"] = kind
            span.attributes["ferry.task.id"] = task.taskIdentifier
            span.attributes["http.request.method"] = Self.method(of: request)
            if let url = request.url { span.attributes["url.full"] = Telemetry.redacted(url) }
            return span
        }
    }

    /// The task span's context, for what runs inside the task; `nil` without a tracer.
    var context: ServiceContext? { span?.context }

    // MARK: Requests

    /// One request's span and what its metrics need.
    struct Request: Sendable {
        fileprivate let span: (any Span)?
        fileprivate let method: String
        fileprivate let scheme: String
    }

    /// Starts the span of one request, a child of the task's, and puts the tracer's fields
    /// (`traceparent`, …) into `request` when the tracer injects any.
    func startRequest(_ request: inout URLRequest, reason: TransactionMetrics.Reason) -> Request {
        let resends = requests.add(1, ordering: .relaxed).oldValue
        let method = Self.method(of: request)
        let url = request.url
        let scheme = url?.scheme?.lowercased() ?? "http"
        guard let tracer, let parent = span else { return Request(span: nil, method: method, scheme: scheme) }
        let span = tracer.startSpan(method, context: parent.context, ofKind: .client)
        span.attributes["http.request.method"] = method
        span.attributes["url.scheme"] = scheme
        if let url {
            span.attributes["url.full"] = Telemetry.redacted(url)
            if let host = url.host { span.attributes["server.address"] = host }
            span.attributes["server.port"] = url.port ?? (scheme == "https" ? 443 : 80)
        }
        if resends > 0 { span.attributes["http.request.resend_count"] = resends }
        span.attributes["ferry.request.reason"] = reason.rawValue
        tracer.inject(span.context, into: &request, using: URLRequestInjector())
        return Request(span: span, method: method, scheme: scheme)
    }

    /// Ends `request`'s span and records its metrics from `transaction`; `failure` is why no
    /// response (or no whole body) came.
    func endRequest(_ request: Request, transaction: TransactionMetrics, failure: FerryError?) {
        let status = transaction.response?.statusCode
        if let span = request.span {
            if let status { span.attributes["http.response.status_code"] = status }
            if let name = transaction.networkProtocolName {
                span.attributes["network.protocol.version"] = name == "h2" ? "2" : "1.1"
            }
            if let failure {
                span.attributes["error.type"] = Self.name(of: failure.reason)
                span.recordError(failure)
                span.setStatus(SpanStatus(code: .error))
            } else if let status, status >= 400 {
                // OpenTelemetry: a client's 4xx and 5xx are errors, named by the status.
                span.attributes["error.type"] = "\(status)"
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
        }
        guard let metrics else { return }
        let base = [("method", request.method), ("scheme", request.scheme), ("task_kind", kind)]
        Counter(
            label: FerryMetric.requests.rawValue,
            dimensions: base + [("status_class", Telemetry.statusClass(status))],
            factory: metrics
        )
        .increment()
        if transaction.countOfRequestBodyBytesSent > 0 {
            Counter(label: FerryMetric.requestBodyBytes.rawValue, dimensions: base, factory: metrics)
                .increment(by: transaction.countOfRequestBodyBytesSent)
        }
        if transaction.countOfResponseBodyBytesReceived > 0 {
            Counter(label: FerryMetric.responseBodyBytes.rawValue, dimensions: base, factory: metrics)
                .increment(by: transaction.countOfResponseBodyBytesReceived)
        }
        if let start = transaction.requestStartDate, let first = transaction.responseStartDate {
            Timer(label: FerryMetric.timeToFirstByte.rawValue, dimensions: base, factory: metrics)
                .recordNanoseconds(Int64(max(0, first.timeIntervalSince(start)) * 1e9))
        }
        if transaction.reason == .retry { count(.retries) }
    }

    // MARK: Events of the task

    /// A redirect from `response` to `url` is followed.
    func redirected(by response: HTTPResponse, to url: URL?) {
        var attributes: SpanAttributes = ["http.response.status_code": .int64(Int64(response.statusCode))]
        if let url { attributes["url.full"] = Telemetry.redacted(url) }
        span?.addEvent(SpanEvent(name: "redirect", attributes: attributes))
        count(.redirects)
    }

    /// A `401` is answered with credentials.
    func challenged(by response: HTTPResponse) {
        span?.addEvent(
            SpanEvent(name: "challenge", attributes: ["http.response.status_code": .int64(Int64(response.statusCode))])
        )
    }

    /// What the task's events say of retries and resumes.
    func observe(_ event: TaskEvent) {
        switch event {
        case .willRetry(let attempt, let delay, let error):
            span?.addEvent(
                SpanEvent(
                    name: "retry",
                    attributes: [
                        "ferry.retry.attempt": .int64(Int64(attempt)), "ferry.retry.delay": .double(delay),
                        "error.type": .string(Self.name(of: error.reason)),
                    ]
                )
            )
            count(.retries)
        case .resumedAtOffset(let offset, _):
            span?.addEvent(SpanEvent(name: "resume", attributes: ["ferry.resume.offset": .int64(offset)]))
            // A start over from byte 0 keeps nothing: no resume.
            if offset > 0 {
                count(.resumes)
                count(.resumedBytes, by: offset)
            }
        default:
            break
        }
    }

    /// A download's checkpoint was written, with `bytes` of the file kept by it.
    func checkpointed(bytes: Int64) {
        span?.addEvent(SpanEvent(name: "checkpoint", attributes: ["ferry.checkpoint.bytes": .int64(bytes)]))
    }

    /// The task's transfer ended with `error` (`nil`: success): the task's counters and
    /// duration, and the end of its span. Only the first call counts.
    func finish(error: FerryError?) {
        guard !finished.exchange(true, ordering: .relaxed) else { return }
        let outcome = error == nil ? "success" : error?.reason == .cancelled ? "cancelled" : "failure"
        if let span {
            span.attributes["ferry.task.outcome"] = outcome
            if let error, error.reason != .cancelled {
                span.attributes["error.type"] = Self.name(of: error.reason)
                span.recordError(error)
                span.setStatus(SpanStatus(code: .error))
            }
            span.end()
        }
        guard let metrics else { return }
        let dimensions = [("task_kind", kind), ("outcome", outcome)]
        Counter(label: FerryMetric.tasks.rawValue, dimensions: dimensions, factory: metrics).increment()
        let elapsed = ContinuousClock.now - started
        Timer(label: FerryMetric.taskDuration.rawValue, dimensions: dimensions, factory: metrics)
            .recordNanoseconds(
                elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000
            )
        if let error, outcome == "failure" {
            Counter(
                label: FerryMetric.failures.rawValue,
                dimensions: [("task_kind", kind), ("reason", Self.name(of: error.reason))],
                factory: metrics
            ).increment()
        }
    }

    // MARK: Names

    private func count(_ metric: FerryMetric, by amount: Int64 = 1) {
        guard let metrics else { return }
        Counter(label: metric.rawValue, dimensions: [("task_kind", kind)], factory: metrics).increment(by: amount)
    }

    private static func kind(of plan: TransferPlan) -> String {
        switch plan {
        case .data: "data"
        case .stream, .socket: "stream"
        case .upload: "upload"
        case .download: "download"
        }
    }

    /// The request's method, or `_OTHER` for one outside HTTP's own (OpenTelemetry's rule,
    /// which keeps the dimension bounded).
    private static func method(of request: URLRequest) -> String {
        let method = (request.httpMethod ?? "GET").uppercased()
        return knownMethods.contains(method) ? method : "_OTHER"
    }

    private static let knownMethods: Set<String> = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ]

    /// A reason's name without the values that would make the dimension unbounded
    /// (`unacceptableStatusCode`, not `unacceptableStatusCode(404)`); `timedOut(idle)` and
    /// `timedOut(resource)` stay apart.
    static func name(of reason: FerryError.Reason) -> String {
        switch reason.code {
        case .unacceptableStatusCode: "unacceptableStatusCode"
        case .unacceptableContentType: "unacceptableContentType"
        case .bodyTooLarge: "bodyTooLarge"
        default: reason.description
        }
    }
}
