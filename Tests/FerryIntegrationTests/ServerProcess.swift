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

    /// Starts `arguments` (with `PORT` replaced by `port`, or a free port) and waits until it
    /// accepts.
    init(_ executable: String, _ arguments: [String], port: Int? = nil, files: [String: String] = [:]) async throws {
        let directory = try makeTemporaryDirectory("server")
        let port = try port ?? Nginx.freePort()
        self.directory = directory
        self.port = port
        for (name, text) in files {
            let resolved = text.replacingOccurrences(of: "PORT", with: "\(port)")
            try resolved.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let resolved = arguments.map {
            $0.replacingOccurrences(of: "PORT", with: "\(port)").replacingOccurrences(of: "DIR", with: directory.path)
        }
        let log = directory.appendingPathComponent("server.log").path
        pid = try ProcessRunner.spawn(executable, resolved, stdout: log, stderr: log)
        for _ in 0..<400 {
            if Nginx.accepts(port: port) { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        stop()
        Issue.record("\(executable) did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        throw CancellationError()
    }

    /// What the server printed so far (standard output and error).
    var output: String {
        (try? String(contentsOf: directory.appendingPathComponent("server.log"), encoding: .utf8)) ?? ""
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
