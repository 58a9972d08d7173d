import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds the user's daemon, starting `ferry daemon` when none answers: what background
/// sessions and `ferry add` do.
package enum BackgroundDaemonLauncher {
    /// Returns once a daemon answers at `locations.socket`.
    ///
    /// One daemon per socket: when a daemon holds the socket's claim (``SocketClaim``) but
    /// does not answer yet, it is starting (or restarting), and it is waited for, at most
    /// 10 s; another is never started over it. When none holds it and `start` is `false`,
    /// a daemon launched a moment ago (which has not claimed its socket yet) is waited for
    /// at most 2 s, then the call says that none answers.
    ///
    /// - Parameters:
    ///   - executable: the `ferry` to start; by default `FERRY_EXECUTABLE`, then a `ferry`
    ///     beside the running executable, then one on `PATH`.
    ///   - start: `false` to fail instead of starting one: the caller knows no state
    ///     directory that goes with the socket (`--socket` given alone), or was asked not to.
    package static func ensureRunning(
        _ locations: BackgroundLocations,
        executable: String? = nil,
        start: Bool = true
    ) async throws {
        let client = BackgroundClient(socket: locations.socket)
        if try await client.health() { return }
        // A listener of another user's is no daemon of this user's, and no reason to start
        // one over its socket: refused, as every request to it is.
        try BackgroundClient.checkPeer(at: locations.socket.path)
        if let owner = SocketClaim.owner(of: locations.socket) {
            if try await answers(client, at: locations.socket) { return }
            throw FerryError(
                .network,
                "\(SocketClaim.ownedMessage(locations.socket, owner: owner)) It does not answer."
            )
        }
        guard start else {
            if try await answers(client, at: locations.socket) { return }
            throw FerryError(.network, "No daemon answers at \(locations.socket.path); start one with `ferry daemon`.")
        }
        guard let program = executable ?? findFerry() else {
            throw FerryError(
                .unsupportedConfiguration,
                "No daemon answers at \(locations.socket.path), and no `ferry` executable was found to start one (set FERRY_EXECUTABLE)."
            )
        }
        try spawn(program, locations)
        if try await answers(client, at: locations.socket, quiet: .seconds(5)) { return }
        if let owner = SocketClaim.owner(of: locations.socket), owner != locations.stateDirectory.path {
            // Another daemon claimed the socket first: the one started here stopped.
            throw FerryError(
                .network,
                "\(SocketClaim.ownedMessage(locations.socket, owner: owner)) It does not answer."
            )
        }
        throw FerryError(
            .network,
            "Started \(program) daemon, but it does not answer at \(locations.socket.path) (see \(locations.stateDirectory.path)/daemon.log)."
        )
    }

    /// Asks `client` until it answers: while no daemon holds the socket's claim, for at most
    /// `quiet`; once one does (it is starting), for at most `claimed` in all.
    private static func answers(
        _ client: BackgroundClient,
        at socket: URL,
        quiet: Duration = .seconds(2),
        claimed: Duration = .seconds(10)
    ) async throws -> Bool {
        let clock = ContinuousClock()
        let started = clock.now
        while true {
            if try await client.health() { return true }
            let bound = SocketClaim.owner(of: socket) == nil ? quiet : max(quiet, claimed)
            if clock.now - started >= bound { return false }
            try await Task.sleep(for: .milliseconds(25))
        }
    }

    private static func findFerry() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["FERRY_EXECUTABLE"], FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        let running = URL(
            fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                ?? CommandLine.arguments[0]
        )
        if running.lastPathComponent == "ferry" { return running.path }
        let sibling = running.deletingLastPathComponent().appendingPathComponent("ferry").path
        if FileManager.default.isExecutableFile(atPath: sibling) { return sibling }
        for directory in (environment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(directory)/ferry"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// `ferry daemon` in a session of its own (it outlives this process and its terminal),
    /// its output appended to `daemon.log`. Two launchers racing is harmless: the daemon's
    /// lock keeps one.
    private static func spawn(_ executable: String, _ locations: BackgroundLocations) throws {
        try FileManager.default.createDirectory(
            at: locations.stateDirectory,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let pid = try ChildProcess.spawn(
            executable,
            ["daemon", "--state-dir", locations.stateDirectory.path, "--socket", locations.socket.path],
            output: .appending(locations.stateDirectory.appendingPathComponent("daemon.log").path),
            newSession: true
        )
        // Reaped by a thread of its own, so it never lingers as a zombie of this process.
        Thread.detachNewThread {
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }
}
