import CoreMetrics
import Ferry
import FerryTestServer
import Foundation
import InMemoryTracing
import MetricsTestKit
import Testing
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Metrics (swift-metrics' test backend) and spans (swift-distributed-tracing's in-memory
/// tracer) read back after real transfers. Each test gives its session its own backends
/// (``SessionConfiguration/metricsFactory``, ``SessionConfiguration/tracer``): nothing is
/// bootstrapped for the process, so the tests beside these see no-op backends.
@Suite("Metrics and traces")
struct ObservabilityTests {
    /// Secrets put into URLs: none may appear in any span's attributes or events.
    static let secrets = ["hunter2", "s3cr3t", "sig-value", "token=", "sig="]

    func makeObservedSession(
        metrics: TestMetrics,
        tracer: InMemoryTracer,
        _ configure: (inout SessionConfiguration) -> Void = { _ in }
    ) throws -> Session {
        try makeSession {
            $0.metricsFactory = metrics
            $0.tracer = tracer
            configure(&$0)
        }
    }

    /// Every attribute value of `spans` and of their events, as text (`SpanAttributes` is
    /// no sequence: it offers `forEach` alone).
    func attributeTexts(_ spans: [FinishedInMemorySpan]) -> [String] {
        var texts: [String] = []
        let collect = { (_: String, value: SpanAttribute) in texts.append("\(value)") }
        for span in spans {
            // swift-format-ignore: ReplaceForEachWithForLoop
            span.attributes.forEach(collect)
            // swift-format-ignore: ReplaceForEachWithForLoop
            for event in span.events { event.attributes.forEach(collect) }
        }
        return texts
    }

    func counter(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)]) -> Int64 {
        metrics.counterTotal(label: label, dimensions: dimensions)
    }

    @Test func aRedirectedRetriedResumedDownloadHasItsCountsAndItsSpanTree() async throws {
        try await withServer { server in
            let metrics = TestMetrics()
            let tracer = InMemoryTracer()
            let session = try makeObservedSession(metrics: metrics, tracer: tracer) {
                $0.retryPolicy = RetryPolicy(maximumRetries: 2, baseDelay: 0.01)
            }
            // Credentials in the URL and secrets in both queries; the first answer of the
            // target is cut after 120,000 of its 200,000 bytes, the retry asks for the rest.
            var components = URLComponents(url: server.url("/redirect/1"), resolvingAgainstBaseURL: false)!
            components.user = "alice"
            components.password = "hunter2"
            components.queryItems = [
                URLQueryItem(name: "token", value: "s3cr3t"),
                URLQueryItem(name: "to", value: "/bytes/200000?seed=3&close-after=120000&sig=sig-value"),
            ]
            let target = try makeTemporaryDirectory("observed").appendingPathComponent("d.bin")
            let (downloaded, _) = try await tracer.withSpan("caller") { _ in
                try await session.download(from: try #require(components.url), to: .file(target))
            }
            #expect(try Data(contentsOf: downloaded) == TestContent.data(size: 200_000, seed: 3))

            // Three requests: the redirect, the answer that was cut, the range that resumed it.
            let download = [("task_kind", "download")]
            let get = [("method", "GET"), ("scheme", "http"), ("task_kind", "download")]
            #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "3xx")]) == 1)
            #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "2xx")]) == 2)
            #expect(counter(metrics, "ferry_redirects_total", download) == 1)
            #expect(counter(metrics, "ferry_retries_total", download) == 1)
            #expect(counter(metrics, "ferry_resumes_total", download) == 1)
            #expect(counter(metrics, "ferry_resumed_bytes_total", download) == 120_000)
            #expect(counter(metrics, "ferry_tasks_total", download + [("outcome", "success")]) == 1)
            #expect(metrics.counters(label: "ferry_task_failures_total").isEmpty)
            #expect(counter(metrics, "ferry_response_body_bytes_total", get) >= 200_000)
            #expect(metrics.timers(label: "ferry_request_time_to_first_byte_seconds").flatMap(\.values).count == 3)
            let durations = try metrics.expectTimer(
                "ferry_task_duration_seconds",
                download + [("outcome", "success")]
            )
            #expect(durations.values.count == 1)
            // No dimension holds a host, a port, a path or a credential.
            for counter in metrics.counters {
                for (_, value) in counter.dimensions {
                    #expect(!value.contains("127.0.0.1") && !value.contains("/") && !value.contains("alice"))
                }
            }

            // The tree: caller ⟶ the task's span ⟶ one client span per request.
            let spans = tracer.finishedSpans
            let caller = try #require(spans.first { $0.operationName == "caller" })
            let task = try #require(spans.first { $0.operationName == "GET download" })
            #expect(task.parentSpanID == caller.spanID)
            #expect(task.traceID == caller.traceID)
            #expect(task.kind == .internal)
            #expect(task.attributes.get("ferry.task.outcome") == .string("success"))
            let requests = spans.filter { $0.parentSpanID == task.spanID }
            #expect(requests.count == 3)
            #expect(requests.allSatisfy { $0.kind == .client && $0.operationName == "GET" })
            #expect(
                requests.map { $0.attributes.get("http.response.status_code") } == [
                    .int64(302), .int64(200), .int64(206),
                ]
            )
            #expect(
                requests.map { $0.attributes.get("ferry.request.reason") } == [
                    .string("initial"), .string("redirect"), .string("resume"),
                ]
            )
            #expect(requests.map { $0.attributes.get("http.request.resend_count") } == [nil, .int64(1), .int64(2)])
            #expect(requests[1].status?.code == .error, "the answer that was cut ended in an error")
            #expect(requests[1].attributes.get("error.type") != nil)
            #expect(requests[2].status == nil)
            let port = Int64(try #require(server.url("/").port))
            for request in requests {
                #expect(request.attributes.get("http.request.method") == .string("GET"))
                #expect(request.attributes.get("server.address") == .string("127.0.0.1"))
                #expect(request.attributes.get("server.port") == .int64(port))
                #expect(request.attributes.get("url.scheme") == .string("http"))
                #expect(request.attributes.get("network.protocol.version") == .string("1.1"))
            }
            #expect(
                requests[0].attributes.get("url.full")
                    == .string("http://REDACTED:REDACTED@127.0.0.1:\(port)/redirect/1?REDACTED")
            )
            // A relative redirect on the same origin keeps the URL's user.
            #expect(
                requests[2].attributes.get("url.full")
                    == .string("http://REDACTED:REDACTED@127.0.0.1:\(port)/bytes/200000?REDACTED")
            )
            // The task's events, in order: the redirect, the retry, its checkpoint, the resume.
            let events = task.events.map(\.name).filter { $0 != "checkpoint" }
            #expect(events == ["redirect", "retry", "resume"])
            #expect(task.events.contains { $0.name == "checkpoint" }, "the cut file was checkpointed before the retry")
            let resume = try #require(task.events.first { $0.name == "resume" })
            #expect(resume.attributes.get("ferry.resume.offset") == .int64(120_000))

            // No credential or query anywhere.
            for text in attributeTexts(spans) {
                for secret in Self.secrets { #expect(!text.contains(secret), "\(text) shows \(secret)") }
            }

            // Each request carried its own span's identifiers to the server.
            let sent = server.requests.filter { $0.uri.hasPrefix("/redirect") || $0.uri.hasPrefix("/bytes") }
            #expect(sent.count == 3)
            #expect(sent.map { $0.headers[InMemoryTracer.spanIDKey] } == requests.map { $0.spanID })
            #expect(sent.allSatisfy { $0.headers[InMemoryTracer.traceIDKey] == caller.traceID })
        }
    }

    @Test func aChallengeIsAnEventAndItsAnswerARequestOfItsOwn() async throws {
        try await withServer { server in
            let metrics = TestMetrics()
            let tracer = InMemoryTracer()
            let session = try makeObservedSession(metrics: metrics, tracer: tracer) {
                $0.credential = Credential(user: "ada", password: "hunter2")
            }
            let (_, response) = try await session.data(from: server.url("/basic-auth/ada/hunter2"))
            #expect(response.statusCode == 200)
            let spans = tracer.finishedSpans
            let task = try #require(spans.first { $0.kind == .internal })
            #expect(task.events.map(\.name) == ["challenge"])
            #expect(task.events.first?.attributes.get("http.response.status_code") == .int64(401))
            let requests = spans.filter { $0.parentSpanID == task.spanID }
            #expect(
                requests.map { $0.attributes.get("ferry.request.reason") } == [
                    .string("initial"), .string("authentication"),
                ]
            )
            #expect(requests.map { $0.attributes.get("http.response.status_code") } == [.int64(401), .int64(200)])
            let get = [("method", "GET"), ("scheme", "http"), ("task_kind", "data")]
            #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "4xx")]) == 1)
            // The path names the password (httpbin's shape); the credential sent never shows.
            let basic = Data("ada:hunter2".utf8).base64EncodedString()
            for text in attributeTexts(spans) { #expect(!text.contains(basic) && !text.contains("Basic ")) }
        }
    }

    @Test func aRefusedConnectionIsAFailureByReason() async throws {
        let metrics = TestMetrics()
        let tracer = InMemoryTracer()
        let session = try makeObservedSession(metrics: metrics, tracer: tracer)
        let port = try closedPort()
        await #expect(throws: FerryError.self) {
            _ = try await session.data(from: URL(string: "http://127.0.0.1:\(port)/nothing?key=s3cr3t")!)
        }
        let data = [("task_kind", "data")]
        #expect(counter(metrics, "ferry_tasks_total", data + [("outcome", "failure")]) == 1)
        #expect(counter(metrics, "ferry_task_failures_total", data + [("reason", "network")]) == 1)
        let get = [("method", "GET"), ("scheme", "http"), ("task_kind", "data")]
        #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "none")]) == 1)
        let spans = tracer.finishedSpans
        let task = try #require(spans.first { $0.operationName == "GET data" })
        #expect(task.parentSpanID == nil, "no caller's span: the task's is a root")
        #expect(task.status?.code == .error)
        #expect(task.attributes.get("error.type") == .string("network"))
        let request = try #require(spans.first { $0.parentSpanID == task.spanID })
        #expect(request.attributes.get("error.type") == .string("network"))
        #expect(request.attributes.get("http.response.status_code") == nil)
        for text in attributeTexts(spans) { #expect(!text.contains("s3cr3t")) }
    }

    /// A task that waits for its slot gets its Swift task only when the slot is granted, from
    /// the task that gave it up; its span still descends from the code that resumed it, not
    /// from the task it waited behind.
    @Test func aTaskThatWaitedForItsSlotDescendsFromItsCaller() async throws {
        try await withServer { server in
            let tracer = InMemoryTracer()
            let session = try makeObservedSession(metrics: TestMetrics(), tracer: tracer) {
                $0.httpMaximumConnectionsPerHost = 1
            }
            let first = session.dataTask(with: server.url("/bytes/2000?drip=100&interval=20&first=1"))
            let second = session.dataTask(with: server.url("/bytes/10?second=1"))
            let firstEvents = first.events
            let secondEvents = second.events
            tracer.withSpan("first caller") { _ in first.resume() }
            tracer.withSpan("second caller") { _ in second.resume() }
            _ = await collectEvents(firstEvents)
            _ = await collectEvents(secondEvents)
            #expect(first.error == nil && second.error == nil)
            let spans = tracer.finishedSpans
            let callers = try ["first caller", "second caller"].map { name in
                try #require(spans.first { $0.operationName == name })
            }
            let tasks = spans.filter { $0.operationName == "GET data" }
            #expect(tasks.count == 2)
            #expect(Set(tasks.map(\.parentSpanID)) == Set(callers.map(\.spanID)))
            #expect(Set(tasks.map(\.traceID)) == Set(callers.map(\.traceID)))
        }
    }

    /// OpenTelemetry: a client's 4xx is an error of its request's span; the task, which
    /// delivered the answer, succeeded.
    @Test func anErrorStatusMarksTheRequestSpanNotTheTask() async throws {
        try await withServer { server in
            let metrics = TestMetrics()
            let tracer = InMemoryTracer()
            let session = try makeObservedSession(metrics: metrics, tracer: tracer)
            let (_, response) = try await session.data(from: server.url("/status/404"))
            #expect(response.statusCode == 404)
            let data = [("task_kind", "data")]
            #expect(counter(metrics, "ferry_tasks_total", data + [("outcome", "success")]) == 1)
            let get = [("method", "GET"), ("scheme", "http"), ("task_kind", "data")]
            #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "4xx")]) == 1)
            let request = try #require(tracer.finishedSpans.first { $0.kind == .client })
            #expect(request.status?.code == .error)
            #expect(request.attributes.get("error.type") == .string("404"))
            let task = try #require(tracer.finishedSpans.first { $0.kind == .internal })
            #expect(task.status == nil)
        }
    }

    @Test func aSessionGivenNoOpBackendsSendsNoTraceFields() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.metricsFactory = NOOPMetricsHandler.instance
                $0.tracer = NoOpTracer()
            }
            let tracer = InMemoryTracer()
            // A caller's span of a tracer the session was not given: nothing of it is sent.
            let (data, _) = try await tracer.withSpan("caller") { _ in
                try await session.data(from: server.url("/bytes/100"))
            }
            #expect(data.count == 100)
            let sent = try #require(server.requests.last)
            #expect(sent.headers[InMemoryTracer.traceIDKey] == nil)
            #expect(sent.headers["traceparent"] == nil)
        }
    }

    /// httpbin (gunicorn) echoes the fields it received: the tracer's identifiers reach a
    /// server nobody here wrote, through a redirect, with the counts the redirect makes.
    @Test(.enabled(if: Httpbin.enabled))
    func httpbinReceivesEachRequestsTraceFields() async throws {
        try await withHttpbin { httpbin in
            let metrics = TestMetrics()
            let tracer = InMemoryTracer()
            let session = try makeObservedSession(metrics: metrics, tracer: tracer)
            let url = try #require(URL(string: httpbin.url("/redirect-to?url=/headers")))
            let (data, response) = try await session.data(from: url)
            #expect(response.statusCode == 200)
            let echoed = try JSONDecoder().decode([String: [String: String]].self, from: data)["headers"] ?? [:]
            let spans = tracer.finishedSpans
            let task = try #require(spans.first { $0.operationName == "GET data" })
            let requests = spans.filter { $0.parentSpanID == task.spanID }
            #expect(requests.count == 2)
            // httpbin spells field names in title case.
            let spanID = echoed.first { $0.key.lowercased() == InMemoryTracer.spanIDKey }?.value
            #expect(spanID == requests.last?.spanID)
            let data2 = [("task_kind", "data")]
            #expect(counter(metrics, "ferry_redirects_total", data2) == 1)
            let get = [("method", "GET"), ("scheme", "http"), ("task_kind", "data")]
            #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "3xx")]) == 1)
            #expect(counter(metrics, "ferry_requests_total", get + [("status_class", "2xx")]) == 1)
            #expect(
                requests.first?.attributes.get("url.full")
                    == .string("http://127.0.0.1:\(httpbin.port)/redirect-to?REDACTED")
            )
        }
    }
}
