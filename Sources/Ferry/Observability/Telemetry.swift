import CoreMetrics
import Foundation
import Tracing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a session's metrics and spans go: the metrics factory and tracer its configuration
/// names, or else those the application bootstrapped (`MetricsSystem`,
/// `InstrumentationSystem`), read once when the session is made.
///
/// Each is `nil` when it is a no-op, so that a process that bootstrapped neither pays
/// nothing per transfer: no ``TaskTelemetry`` is made, and no attribute is formatted.
struct Telemetry: Sendable {
    /// Where counters and timers are made; `nil`: nothing is recorded.
    let metrics: (any MetricsFactory)?
    /// The tracer of the task and request spans; `nil`: no span is started.
    let tracer: (any Tracer)?

    init(_ configuration: SessionConfiguration) {
        let factory = configuration.metricsFactory ?? MetricsSystem.factory
        metrics = factory is NOOPMetricsHandler ? nil : factory
        let tracer = configuration.tracer ?? InstrumentationSystem.tracer
        self.tracer = tracer is NoOpTracer ? nil : tracer
    }

    /// Whether anything is recorded at all.
    var isActive: Bool { metrics != nil || tracer != nil }

    /// `url` as a span's `url.full` may show it: user and password replaced by `REDACTED`
    /// (OpenTelemetry's rule), the query by `REDACTED` (it carries tokens and signatures),
    /// the fragment (never sent) dropped.
    static func redacted(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "REDACTED" }
        if components.user != nil || components.password != nil {
            components.user = "REDACTED"
            components.password = "REDACTED"
        }
        if components.query != nil { components.percentEncodedQuery = "REDACTED" }
        components.fragment = nil
        return components.string ?? "REDACTED"
    }

    /// `1xx` … `5xx` for a status, `none` when no response came.
    static func statusClass(_ status: Int?) -> String {
        guard let status, (100...599).contains(status) else { return "none" }
        return "\(status / 100)xx"
    }
}

/// Puts a tracer's fields (`traceparent`, …) into a request's header fields.
struct URLRequestInjector: Injector {
    func inject(_ value: String, forKey key: String, into request: inout URLRequest) {
        request.setValue(value, forHTTPHeaderField: key)
    }
}
