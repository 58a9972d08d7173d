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
    /// - Parameters:
    ///   - executable: the `ferry` to start; by default `FERRY_EXECUTABLE`, then a `ferry`
    ///     beside the running executable, then one on `PATH`.
    ///   - start: `false` to fail instead of starting one.
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
        guard start else {
            throw FerryError(.network, "No daemon answers at \(locations.socket.path); start one with `ferry daemon`.")
        }
        guard let program = executable ?? findFerry() else {
            throw FerryError(
                .unsupportedConfiguration,
                "No daemon answers at \(locations.socket.path), and no `ferry` executable was found to start one (set FERRY_EXECUTABLE)."
            )
        }
        try spawn(program, locations)
        for _ in 0..<200 {
            if try await client.health() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw FerryError(
            .network,
            "Started \(program) daemon, but it does not answer at \(locations.socket.path) (see \(locations.stateDirectory.path)/daemon.log)."
        )
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
