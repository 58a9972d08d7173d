import CoreMetrics
import Ferry
import Prometheus

extension DaemonMetrics {
    /// A swift-metrics factory that records into the daemon's registry with each metric's
    /// `# HELP` text, which `PrometheusMetricsFactory` leaves empty (swift-metrics has no
    /// place for one): Ferry's from ``FerryMetric/help``, any other a line naming it.
    ///
    /// Counters are Prometheus counters, timers duration histograms, aggregating recorders
    /// value histograms, meters and other recorders gauges, with `PrometheusMetricsFactory`'s
    /// buckets; a metric's help depends on its label alone, so every series of a family
    /// has the same (the registry insists on it).
    struct Factory: MetricsFactory {
        let registry: PrometheusCollectorRegistry
        /// Its buckets and its `destroy` calls.
        private let prometheus: PrometheusMetricsFactory

        init(registry: PrometheusCollectorRegistry) {
            self.registry = registry
            prometheus = PrometheusMetricsFactory(registry: registry)
        }

        /// The `# HELP` text of `label`.
        static func help(for label: String) -> String {
            FerryMetric(rawValue: label)?.help ?? "\(label), as recorded through swift-metrics."
        }

        /// `label` as the registry names a metric, with its help.
        private static func descriptor(_ label: String) -> MetricNameDescriptor {
            MetricNameDescriptor(
                metricName: label.isEmpty ? "unnamed" : label,
                unitName: "",
                helpText: help(for: label)
            )
        }

        func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
            registry.makeCounter(descriptor: Self.descriptor(label), labels: dimensions)
        }

        func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler
        {
            registry.makeCounter(descriptor: Self.descriptor(label), labels: dimensions)
        }

        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
            guard aggregate else {
                return registry.makeGauge(descriptor: Self.descriptor(label), labels: dimensions)
            }
            return registry.makeValueHistogram(
                descriptor: Self.descriptor(label),
                labels: dimensions,
                buckets: prometheus.valueHistogramBuckets[label] ?? prometheus.defaultValueHistogramBuckets
            )
        }

        func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
            registry.makeGauge(descriptor: Self.descriptor(label), labels: dimensions)
        }

        func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
            registry.makeDurationHistogram(
                descriptor: Self.descriptor(label),
                labels: dimensions,
                buckets: prometheus.durationHistogramBuckets[label] ?? prometheus.defaultDurationHistogramBuckets
            )
        }

        func destroyCounter(_ handler: any CounterHandler) { prometheus.destroyCounter(handler) }
        func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
            prometheus.destroyFloatingPointCounter(handler)
        }
        func destroyRecorder(_ handler: any RecorderHandler) { prometheus.destroyRecorder(handler) }
        func destroyMeter(_ handler: any MeterHandler) { prometheus.destroyMeter(handler) }
        func destroyTimer(_ handler: any TimerHandler) { prometheus.destroyTimer(handler) }
    }
}
