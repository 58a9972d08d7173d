/// Ferry's metrics: the label each is recorded under and what it counts.
///
/// Their dimensions are few and bounded (method, scheme, status class, task kind, outcome,
/// a failure's reason): never a URL, a host or a credential. swift-metrics has no place
/// for a description, so an exporter that shows one (Prometheus's `# HELP`, which
/// `promtool check metrics` wants for every metric) finds it here by the label:
///
/// ```swift
/// let help = FerryMetric(rawValue: "ferry_requests_total")?.help
/// ```
package enum FerryMetric: String, CaseIterable, Sendable {
    case requests = "ferry_requests_total"
    case requestBodyBytes = "ferry_request_body_bytes_total"
    case responseBodyBytes = "ferry_response_body_bytes_total"
    case timeToFirstByte = "ferry_request_time_to_first_byte_seconds"
    case redirects = "ferry_redirects_total"
    case retries = "ferry_retries_total"
    case resumes = "ferry_resumes_total"
    case resumedBytes = "ferry_resumed_bytes_total"
    case tasks = "ferry_tasks_total"
    case failures = "ferry_task_failures_total"
    case taskDuration = "ferry_task_duration_seconds"

    /// What the metric counts, in one line.
    package var help: String {
        switch self {
        case .requests: "Requests sent: every redirect hop, retry, authentication and range request."
        case .requestBodyBytes: "Request body bytes sent."
        case .responseBodyBytes: "Response body bytes received, as they came over the wire."
        case .timeToFirstByte: "Time from a request handed to its connection to its response's head."
        case .redirects: "Redirects followed."
        case .retries: "Requests sent again under the retry policy or at an interceptor's request."
        case .resumes: "Downloads and uploads that continued from bytes already transferred."
        case .resumedBytes: "Bytes that resumes kept instead of transferring them again."
        case .tasks: "Tasks whose transfer ended, by outcome."
        case .failures: "Failed tasks, by the reason of their failure."
        case .taskDuration: "Time from the start of a task's transfer to its end."
        }
    }
}
