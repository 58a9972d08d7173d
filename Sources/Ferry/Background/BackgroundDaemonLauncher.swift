import Foundation

#if canImport(Glibc)
package import Glibc
#elseif canImport(Darwin)
package import Darwin
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

    /// Adds to `actions` the closing of every descriptor above 2 in the child. A
    /// long-lived child must not keep copies of this process's sockets: a connection the
    /// parent closes would stay open while the child lives.
    package static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        // glibc 2.34 and later; Glibc's module map does not export it, so look it up.
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap(Int32.init) where descriptor > 2 {
            if fcntl(descriptor, F_GETFD) >= 0, fcntl(descriptor, F_GETFD) & FD_CLOEXEC == 0 {
                posix_spawn_file_actions_addclose(&actions, descriptor)
            }
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
        let arguments = [
            executable, "daemon", "--state-dir", locations.stateDirectory.path, "--socket", locations.socket.path,
        ]
        let log = locations.stateDirectory.appendingPathComponent("daemon.log").path
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeInheritedDescriptors(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (glibc 2.26 and later; Glibc does not export the name), and the
        // default signal mask and handlers (a test runner's threads block most signals).
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(0x80 | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid = pid_t()
        let argv = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard status == 0 else {
            throw FerryError(.fileSystem, "Cannot start '\(executable) daemon' (error \(status)).")
        }
        // Reaped by a thread of its own, so it never lingers as a zombie of this process.
        let child = pid
        Thread.detachNewThread {
            var status: Int32 = 0
            waitpid(child, &status, 0)
        }
    }
}
