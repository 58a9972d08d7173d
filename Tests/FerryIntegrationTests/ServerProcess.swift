import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A server nobody here wrote, started as a process for one test on a free loopback port and
/// stopped after it (socat, microsocks, tinyproxy, Python's websockets and ssl).
final class ServerProcess {
    let port: Int
    private let pid: pid_t
    private let directory: URL

    /// Starts `arguments` (with `PORT` replaced by a free port) and waits until it listens.
    ///
    /// The wait is for a state, not a time: it ends when the server listens, or when its
    /// process has exited (then its output is recorded, and it is tried again on another port:
    /// a port found free can be taken by another test's server before this one binds it). A
    /// server alive but silent for a minute fails the test.
    init(_ executable: String, _ arguments: [String], files: [String: String] = [:]) async throws {
        let directory = try makeTemporaryDirectory("server")
        self.directory = directory
        let log = Self.log(in: directory).path
        var attempt = 0
        while true {
            attempt += 1
            let chosen = try Nginx.freePort()
            for (name, text) in files {
                let resolved = text.replacingOccurrences(of: "PORT", with: "\(chosen)")
                try resolved.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
            }
            let resolved = arguments.map {
                $0.replacingOccurrences(of: "PORT", with: "\(chosen)").replacingOccurrences(
                    of: "DIR",
                    with: directory.path
                )
            }
            let pid = try ProcessRunner.spawn(executable, resolved, stdout: log, stderr: log)
            let state = await ProcessRunner.waitUntilListening(pid: pid, port: chosen)
            let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            switch state {
            case .listening:
                self.port = chosen
                self.pid = pid
                return
            case .exited(let status) where attempt < 3:
                print(
                    "\(executable) exited (status \(status)) before listening on \(chosen), trying another port: \(output)"
                )
                continue
            case .exited(let status):
                Issue.record("\(executable) exited (status \(status)) before listening on \(chosen): \(output)")
            case .gone:
                Issue.record("\(executable) ended, reaped elsewhere, before listening on \(chosen): \(output)")
            case .silent:
                ProcessRunner.stop(pid)
                Issue.record("\(executable) did not listen on \(chosen) within a minute: \(output)")
            }
            try? FileManager.default.removeItem(at: directory)
            throw CancellationError()
        }
    }

    /// Where the server's standard output and error go.
    private static func log(in directory: URL) -> URL {
        directory.appendingPathComponent("server.log")
    }

    /// What the server printed so far (standard output and error).
    var output: String {
        (try? String(contentsOf: Self.log(in: directory), encoding: .utf8)) ?? ""
    }

    /// Writes `text` to the file `name` in the server's directory (`DIR` in its arguments),
    /// replacing it at once: for what the server reads after it started.
    func write(_ text: String, toFile name: String) throws {
        try text.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
    }

    func stop() {
        ProcessRunner.stop(pid)
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Whether `python3` can import `module` (a PyPI package a test's server needs).
func pythonCanImport(_ module: String) -> Bool {
    let check = Process()
    check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    check.arguments = ["python3", "-c", "import \(module)"]
    check.standardOutput = FileHandle.nullDevice
    check.standardError = FileHandle.nullDevice
    guard (try? check.run()) != nil else { return false }
    check.waitUntilExit()
    return check.terminationStatus == 0
}
