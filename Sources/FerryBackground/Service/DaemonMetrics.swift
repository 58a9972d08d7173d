package import CoreMetrics
import Ferry
import Foundation
import Prometheus

/// The daemon's metrics in Prometheus's text format: its transfers' (Ferry's counters and
/// timers, recorded through the factory its session is given) and its tasks by state, read
/// when scraped.
package final class DaemonMetrics: Sendable {
    private let registry = PrometheusCollectorRegistry()
    /// `ferry_daemon_tasks{state=…}`.
    private static var tasks: MetricNameDescriptor {
        MetricNameDescriptor(
            namespace: "ferry",
            subsystem: "daemon",
            metricName: "tasks",
            unitName: "",
            helpText: "Tasks the daemon holds, by state."
        )
    }

    package init() {}

    /// The factory the daemon's session records into: every metric with its `# HELP` text.
    package var factory: any MetricsFactory { Factory(registry: registry) }

    /// The text `GET /metrics` answers, with `ferry_daemon_tasks{state=…}` as `daemon` has
    /// them now.
    package func text(for daemon: BackgroundDaemon) async -> String {
        let counts = (try? await daemon.taskCounts()) ?? [:]
        for state in BackgroundTaskRecord.State.allCases {
            registry.makeGauge(descriptor: Self.tasks, labels: [("state", state.rawValue)])
                .set(Int64(counts[state] ?? 0))
        }
        return registry.emitToString()
    }
}
