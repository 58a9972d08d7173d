import Foundation

#if canImport(Glibc)
import Glibc
#endif

extension ProcessRunner {
    /// How the wait for a server process to listen ended.
    enum ListenState: Equatable {
        /// The process listens on the port.
        case listening
        /// The process ended (and was reaped) with this exit status (128 + a signal).
        case exited(Int32)
        /// The process is gone, reaped by someone else: its status is not known.
        case gone
        /// The process neither listened nor ended within a minute.
        case silent
    }

    /// Waits until process `pid`, started to serve `port`, listens there.
    ///
    /// The wait is for a state, not a time: it ends when the process listens (it holds the
    /// listening socket: see ``listens(pid:port:)``), or when it has ended (reaped here, or
    /// gone when `waitpid` says it is not this process's child); only a process alive and
    /// not listening for a minute ends it otherwise. A busy machine can take seconds to start
    /// a server, so no shorter bound fits.
    ///
    /// - Parameters:
    ///   - pid: The server's process, started by this test (it is reaped if it ends).
    ///   - port: The port it was told to listen on.
    static func waitUntilListening(pid: pid_t, port: Int) async -> ListenState {
        var status: Int32 = 0
        for _ in 0..<2_400 {
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid { return .exited(exitStatus(fromWaitStatus: status)) }
            if reaped == -1 && errno == ECHILD && kill(pid, 0) == -1 && errno == ESRCH { return .gone }
            if listens(pid: pid, port: port) { return .listening }
            try? await Task.sleep(for: .milliseconds(25))
        }
        return .silent
    }

    /// Waits until server process `pid` listens on `port`, or throws an error that says how the
    /// wait ended, with what the server wrote.
    ///
    /// The wait is ``waitUntilListening(pid:port:)``'s; a server still alive when it gives up is
    /// stopped.
    ///
    /// - Parameters:
    ///   - pid: The server's process, started by this test.
    ///   - port: The port it was told to listen on.
    ///   - server: The server's name, for the error (its domain and message).
    ///   - logs: The files the server writes to, read into the error.
    static func expectListening(pid: pid_t, port: Int, server: String, logs: [String]) async throws {
        let state = await waitUntilListening(pid: pid, port: port)
        if state == .listening { return }
        if state == .silent { stop(pid) }
        let written = logs.compactMap { try? String(contentsOfFile: $0, encoding: .utf8) }.joined()
        throw NSError(
            domain: server,
            code: 1,
            userInfo: [NSLocalizedDescriptionKey: "\(server) did not start (\(state)): \(written)"]
        )
    }

    /// Whether process `pid` listens on TCP `port`: a socket of `/proc/net/tcp` (or `tcp6`)
    /// in the listening state on that port is among the process's open files.
    ///
    /// The tables are read whole (``TCPTableSocket/all(in:)``): a run leaves hundreds of sockets there.
    ///
    /// That the port accepts a connection is not enough: while a server starts, another test's
    /// server can hold the port it was given (the free port it was handed, taken in between),
    /// and a test would then talk to a server that is not its own.
    static func listens(pid: pid_t, port: Int) -> Bool {
        let sockets = Set(
            TCPTableSocket.all().filter { $0.localPort == port && $0.state == TCPTableSocket.listening }.map {
                "socket:[\($0.inode)]"
            }
        )
        guard !sockets.isEmpty else { return false }
        let files = "/proc/\(pid)/fd"
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: files)) ?? []
        return descriptors.contains { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(files)/\(descriptor)"))
                .map(sockets.contains) ?? false
        }
    }
}
