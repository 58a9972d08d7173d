import Foundation

#if canImport(Glibc)
package import Glibc
#elseif canImport(Darwin)
package import Darwin
#endif

/// Starts a program with `posix_spawn`, cleanly: standard input from `/dev/null`, output to
/// files, the default signal mask and handlers (the caller's threads may block signals, and
/// a child inherits that), and no descriptor of the caller's beyond the three standard ones
/// (a long-lived child holding a copy of a socket keeps that connection open after the
/// caller closed it).
package enum ChildProcess {
    /// Where a child's standard output and error go.
    package enum Output: Sendable {
        /// Standard output and error to these files, truncated.
        case files(stdout: String, stderr: String)
        /// Both appended to one file (a log).
        case appending(String)
    }

    /// - Parameters:
    ///   - newSession: start it in a session of its own (it outlives the caller's terminal).
    ///   - environment: variables added to (or replacing) the caller's.
    /// - Returns: its process id; the caller waits for it (or lets it outlive itself).
    package static func spawn(
        _ executable: String,
        _ arguments: [String],
        output: Output,
        newSession: Bool = false,
        environment: [String: String] = [:]
    ) throws(FerryError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        switch output {
        case .files(let stdout, let stderr):
            posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        case .appending(let log):
            posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            posix_spawn_file_actions_adddup2(&actions, 1, 2)
        }
        closeInheritedDescriptors(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // 0x80 is POSIX_SPAWN_SETSID (glibc 2.26 and later; Glibc does not export the name).
        let session: Int32 = newSession ? 0x80 : 0
        posix_spawnattr_setflags(&attributes, Int16(session | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var variables = ProcessInfo.processInfo.environment
        variables.merge(environment) { _, new in new }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid = pid_t()
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard status == 0 else {
            throw FerryError(.fileSystem, "Cannot start '\(executable)' (\(String(cString: strerror(status)))).")
        }
        return pid
    }

    /// Adds the closing of every descriptor above 2 in the child.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        // glibc 2.34 and later; Glibc's module map does not export it, so look it up.
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
            return
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap(Int32.init) where descriptor > 2 {
            let flags = fcntl(descriptor, F_GETFD)
            if flags >= 0, flags & FD_CLOEXEC == 0 { posix_spawn_file_actions_addclose(&actions, descriptor) }
        }
    }
}
