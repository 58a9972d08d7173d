import ArgumentParser
import Ferry
import FerryBackground
import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the daemon is: shared by every daemon command.
struct DaemonOptions: ParsableArguments {
    @Option(
        name: .customLong("socket"),
        help: "The daemon's socket (default: FERRY_SOCKET, then $XDG_RUNTIME_DIR/ferry/daemon.sock)."
    )
    var socket: String?

    @Option(
        name: .customLong("state-dir"),
        help: "The daemon's state directory (default: FERRY_STATE_DIR, then $XDG_STATE_HOME/ferry)."
    )
    var stateDirectory: String?

    var locations: BackgroundLocations { BackgroundLocations(stateDirectory: stateDirectory, socket: socket) }
    var client: BackgroundClient { BackgroundClient(socket: locations.socket) }

    /// Whether a command may start a daemon when none answers: only for a socket and state
    /// directory that go together — the defaults, a state directory given (with its socket
    /// or the one given beside it). A socket given alone (`--socket`, `FERRY_SOCKET`) says
    /// nothing of the state directory of the daemon that owns it: a daemon started with the
    /// default one would be a second daemon, with a store of its own, on that socket.
    var mayStartDaemon: Bool {
        let environment = ProcessInfo.processInfo.environment
        let socketNamed = socket != nil || !(environment["FERRY_SOCKET"] ?? "").isEmpty
        let stateNamed = stateDirectory != nil || !(environment["FERRY_STATE_DIR"] ?? "").isEmpty
        return !socketNamed || stateNamed
    }

    /// A client of a daemon that answers: the running one, else one started now (as
    /// `ferry add` starts it, when ``mayStartDaemon``). A daemon that is still binding its
    /// socket (just restarted, or started by another command a moment ago) is waited for as
    /// long as a start may take, rather than failing at once, and never doubled.
    func answeringClient() async throws -> BackgroundClient {
        try await BackgroundDaemonLauncher.ensureRunning(locations, start: mayStartDaemon)
        return client
    }
}

/// `ferry daemon`: runs the background daemon in the foreground.
struct DaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run the background daemon (in the foreground, for service managers and tests).",
        discussion: """
            One daemon per state directory and per socket (a second one for either stops at once, \
            naming the owner): it owns the downloads added with `ferry add` and by \
            background sessions, keeps them in SQLite (ferry.sqlite, WAL) and continues them from \
            their last checkpoint after any crash. It answers on a Unix socket only its user can \
            open. SIGTERM or SIGINT drains it: every transfer writes its last checkpoint and continues \
            at the next start. Under systemd (Type=notify) it says READY=1 on NOTIFY_SOCKET once it \
            answers. With --web, GET /metrics there serves Prometheus's format behind the token.
            """
    )

    @OptionGroup var daemon: DaemonOptions

    @Option(name: .customLong("allow"), help: "Also allow finished files under this directory (repeatable).")
    var allowed: [String] = []

    @Option(name: .customLong("max-transfers"), help: "Transfers at once, all hosts together.")
    var globalLimit = 8

    @Option(name: .customLong("max-per-host"), help: "Transfers at once per host.")
    var perHostLimit = 4

    @Option(
        name: .customLong("limit-rate"),
        help: "At most RATE bytes per second for all transfers together (suffixes k, M, G)."
    )
    var limitRate: String?

    @Option(
        name: .customLong("web"),
        help: ArgumentHelp(
            "Also serve a web page of the transfers at HOST:PORT, loopback only (127.0.0.1:6801; port 0 picks one).",
            discussion: "Off by default. `ferry web` prints the address to open, with its token.",
            valueName: "host:port"
        )
    )
    var web: String?

    @Option(
        name: .customLong("keep-days"),
        help: "Days a finished task is kept (then ferry ls --all no longer shows it)."
    )
    var keepDays = 7.0

    @Option(name: .customLong("keep-finished"), help: "Finished tasks kept at most; the oldest go first.")
    var keepFinished = 1000

    @Option(
        name: .customLong("log-level"),
        help:
            "What the log on standard error says: trace, debug (request heads, resume decisions), info (each task's start, resume and end), notice, warning, error, critical."
    )
    var logLevel = "info"

    func validate() throws {
        if Logger.Level(rawValue: logLevel) == nil {
            throw ValidationError("--log-level takes trace, debug, info, notice, warning, error or critical.")
        }
        if let web, WebAddress.parse(web) == nil {
            throw ValidationError(
                "--web takes a loopback address and a port: 127.0.0.1:6801, [::1]:6801 or localhost:6801."
            )
        }
        if let limitRate, (Int64(byteCount: limitRate) ?? 0) < 1 {
            throw ValidationError("--limit-rate takes bytes per second, with k, M or G if you like (2M).")
        }
    }

    func run() async throws {
        let locations = daemon.locations
        do {
            try FileManager.default.createDirectory(
                at: locations.stateDirectory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            guard let lock = try ProcessClaim(file: locations.stateDirectory.appendingPathComponent("daemon.lock"))
            else {
                throw FerryError(
                    .unsupportedConfiguration,
                    "A daemon already runs for \(locations.stateDirectory.path)."
                )
            }
            // One daemon per socket too, for the daemon's whole life.
            let socketClaim = try SocketClaim.claim(locations.socket, stateDirectory: locations.stateDirectory)
            var options = BackgroundDaemon.Options(stateDirectory: locations.stateDirectory)
            options.globalLimit = max(1, globalLimit)
            options.perHostLimit = max(1, perHostLimit)
            options.bytesPerSecond = limitRate.flatMap(Int64.init(byteCount:))
            var allowed = [
                FileManager.default.homeDirectoryForCurrentUser, locations.stateDirectory,
                FileManager.default.temporaryDirectory, URL(fileURLWithPath: "/tmp"),
            ]
            allowed += self.allowed.map { URL(fileURLWithPath: $0, isDirectory: true) }
            let allowedDirectories = allowed
            options.allowedDirectories = allowedDirectories
            options.retention.maximumAge = max(0, keepDays) * 86_400
            options.retention.maximumFinishedTasks = max(0, keepFinished)
            // Its lines go to the journal: no password or signature in them.
            var logger = Logger(label: "ferry.daemon") { label in
                RedactingLogHandler(StreamLogHandler.standardError(label: label))
            }
            logger.logLevel = Logger.Level(rawValue: logLevel) ?? .info
            options.logger = logger
            let log = logger
            let metrics = web == nil ? nil : DaemonMetrics()
            let service = BackgroundDaemonService(
                options: options,
                metrics: metrics,
                notifier: SystemdNotifier(),
                logger: logger
            ) { daemon in
                let server = try await BackgroundServer.start(
                    daemon: daemon,
                    socket: locations.socket,
                    allowedDirectories: allowedDirectories
                )
                log.notice("listening on \(server.socketPath) (state in \(locations.stateDirectory.path))")
                let metricsText = metrics.map { metrics in { @Sendable in await metrics.text(for: daemon) } }
                guard let webServer = try await startWeb(daemon, allowedDirectories, locations, log, metricsText)
                else { return [server] }
                return [server, webServer]
            }
            // SIGTERM and SIGINT drain it: transfers checkpoint and continue at the next start.
            let group = ServiceGroup(
                services: [service],
                gracefulShutdownSignals: [.sigterm, .sigint],
                logger: logger
            )
            try await group.run()
            try? FileManager.default.removeItem(at: WebCommand.addressFile(locations))
            withExtendedLifetime((lock, socketClaim)) {}
        } catch {
            ExitStatus.exit(with: error)
        }
    }
}

extension DaemonCommand {
    /// With `--web`: a new token, the web interface, and its address (with the token) in
    /// the state directory's `web.url`, 0600, for `ferry web`. Without: no `web.url`.
    private func startWeb(
        _ service: BackgroundDaemon,
        _ allowedDirectories: [URL],
        _ locations: BackgroundLocations,
        _ logger: Logger,
        _ metrics: (@Sendable () async -> String)?
    ) async throws -> BackgroundServer? {
        let file = WebCommand.addressFile(locations)
        try? FileManager.default.removeItem(at: file)
        guard let web, let (host, port) = WebAddress.parse(web) else { return nil }
        let token = WebAddress.makeToken()
        let home = FileManager.default.homeDirectoryForCurrentUser
        let downloads = home.appendingPathComponent("Downloads", isDirectory: true)
        let saveTo = FileManager.default.fileExists(atPath: downloads.path) ? downloads : home
        let server: BackgroundServer
        do {
            server = try await BackgroundServer.startWeb(
                daemon: service,
                host: host,
                port: port,
                token: token,
                allowedDirectories: allowedDirectories,
                saveTo: saveTo.path,
                metrics: metrics
            )
        } catch {
            throw FerryError(.unsupportedConfiguration, "The web page cannot listen on \(web): \(error).")
        }
        let address = "\(server.socketPath)?token=\(token)"
        try FileSystem.writeAtomically(Data((address + "\n").utf8), to: file)
        // The token stays out of the log (the journal, under systemd, is read by others).
        logger.notice("web interface on \(server.socketPath): `ferry web` prints its address with the token")
        return server
    }
}
