import Ferry
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a child process did: exit status, output, and its peak resident memory.
struct ProcessResult: Sendable {
    var status: Int32
    var stdout: Data
    var stderr: Data
    /// Peak resident set size in KiB: the child's own `VmHWM`, sampled every 10 ms while it
    /// runs. (`ru_maxrss` is no use here: `posix_spawn` starts the child in the parent's
    /// address space, and on `exec` the kernel folds the parent's peak into the child's.)
    var maxResidentKiB: Int

    var stderrText: String { String(decoding: stderr, as: UTF8.self) }
    var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
}

enum ProcessRunner {
    /// The directory holding the test bundle and the package's executables.
    static var productsDirectory: URL {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: executable).deletingLastPathComponent()
    }

    /// The `ferry` executable built beside the tests, or the one `FERRY_EXECUTABLE` names:
    /// `.ci/run` runs the integration suites again with the installed release build, so
    /// the binary people get passes the same tests as the one the suite builds.
    static var ferry: String {
        ProcessInfo.processInfo.environment["FERRY_EXECUTABLE"].flatMap { $0.isEmpty ? nil : $0 }
            ?? productsDirectory.appendingPathComponent("ferry").path
    }

    /// Runs `executable` to completion on its own thread, capturing output through files.
    static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:]
    ) async throws
        -> ProcessResult
    {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-proc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let out = scratch.appendingPathComponent("stdout").path
        let err = scratch.appendingPathComponent("stderr").path
        let (status, rss) = try await withCheckedThrowingContinuation {
            (continuation: CheckedContinuation<(Int32, Int), any Error>) in
            let thread = Thread {
                continuation.resume(
                    with: Result {
                        try spawnAndWait(executable, arguments, stdout: out, stderr: err, environment: environment)
                    }
                )
            }
            thread.start()
        }
        return ProcessResult(
            status: status,
            stdout: (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data(),
            stderr: (try? Data(contentsOf: URL(fileURLWithPath: err))) ?? Data(),
            maxResidentKiB: rss
        )
    }

    private static func spawnAndWait(
        _ executable: String,
        _ arguments: [String],
        stdout: String,
        stderr: String,
        environment: [String: String]
    ) throws -> (Int32, Int) {
        let pid = try spawn(executable, arguments, stdout: stdout, stderr: stderr, environment: environment)
        var status: Int32 = 0
        var peak = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { break }
            if result < 0 && errno != EINTR { break }
            peak = max(peak, highWaterResidentKiB(of: pid) ?? 0)
            usleep(10_000)
        }
        return (exitStatus(fromWaitStatus: status), peak)
    }

    /// A `waitpid` status as a shell reports it: the exit status, or 128 + the signal that
    /// ended the process.
    static func exitStatus(fromWaitStatus status: Int32) -> Int32 {
        (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }

    /// `VmHWM` of a running process, in KiB.
    static func highWaterResidentKiB(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.dropFirst("VmHWM:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
        }
        return nil
    }

    /// Starts `executable` with output to files (see ``ChildProcess``: default signals, no
    /// inherited descriptors: daemons live long and must not hold the test servers'
    /// connections open).
    static func spawn(
        _ executable: String,
        _ arguments: [String],
        stdout: String,
        stderr: String,
        environment: [String: String] = [:]
    ) throws -> pid_t {
        try ChildProcess.spawn(
            executable,
            arguments,
            output: .files(stdout: stdout, stderr: stderr),
            environment: environment
        )
    }

    /// Runs a bash script (pipelines: `ferry get URL | head -c1`), with `FERRY` set to the
    /// `ferry` executable.
    static func bash(_ script: String, environment: [String: String] = [:]) async throws -> ProcessResult {
        try await run("/bin/bash", ["-c", script], environment: environment.merging(["FERRY": ferry]) { a, _ in a })
    }

    /// Stops a process started with ``spawn(_:_:stdout:stderr:)``: SIGTERM, then SIGKILL
    /// after two seconds.
    static func stop(_ pid: pid_t) {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        for _ in 0..<200 {
            if waitpid(pid, &status, WNOHANG) == pid { return }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
    }
}
