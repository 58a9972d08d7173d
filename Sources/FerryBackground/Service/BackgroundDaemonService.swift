package import Logging
import ServiceLifecycle

/// `ferry daemon` as a service of swift-service-lifecycle, for a `ServiceGroup` that turns
/// SIGTERM and SIGINT into a graceful shutdown.
///
/// ## Lifecycle
/// ``run()`` makes the daemon, binds its listeners (``listen``: the socket first, then the
/// web interface), picks up the transfers the last run left, and says `READY=1` to the
/// service manager (``SystemdNotifier``, when `NOTIFY_SOCKET` is set). It then serves until
/// the group's graceful shutdown, which drains the daemon (``BackgroundDaemon/drain()``:
/// every transfer writes its last checkpoint and is left queued for the next start), closes
/// the listeners (the socket's file removed) and returns. A cancelled group skips the drain:
/// the checkpoints already written are what the next start continues from, as after
/// `kill -9`.
package struct BackgroundDaemonService: Service {
    /// The daemon's options (its metrics factory is set from ``metrics``).
    let options: BackgroundDaemon.Options
    /// Binds the daemon's listeners, the socket first.
    let listen: @Sendable (BackgroundDaemon) async throws -> [BackgroundServer]
    /// The Prometheus registry the daemon's transfers record into, when it serves them.
    let metrics: DaemonMetrics?
    let notifier: SystemdNotifier?
    let logger: Logger

    /// - Parameters:
    ///   - options: How the daemon runs.
    ///   - metrics: Where its transfers' metrics go; `nil`: nowhere.
    ///   - notifier: The service manager to tell of readiness and stopping.
    ///   - logger: Where it says so.
    ///   - listen: Binds the listeners for a daemon, the socket first.
    package init(
        options: BackgroundDaemon.Options,
        metrics: DaemonMetrics?,
        notifier: SystemdNotifier?,
        logger: Logger,
        listen: @escaping @Sendable (BackgroundDaemon) async throws -> [BackgroundServer]
    ) {
        self.options = options
        self.metrics = metrics
        self.notifier = notifier
        self.logger = logger
        self.listen = listen
    }

    package func run() async throws {
        var options = options
        options.metricsFactory = metrics?.factory
        let daemon = try BackgroundDaemon(options: options)
        let servers = try await listen(daemon)
        // Transfers start once the daemon answers.
        try await daemon.start()
        notifier?.notify("READY=1\nSTATUS=Answering on \(servers.first?.socketPath ?? "its socket")")
        await withTaskGroup(of: Void.self) { group in
            for server in servers { group.addTask { await server.run() } }
            do {
                try await gracefulShutdown()
                notifier?.notify("STOPPING=1\nSTATUS=Stopping: checkpointing transfers")
                await daemon.drain()
            } catch {
                // Cancelled rather than shut down: no drain.
                notifier?.notify("STOPPING=1")
            }
            for server in servers { await server.close() }
        }
        logger.notice("stopped")
    }
}
