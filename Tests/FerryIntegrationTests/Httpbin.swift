import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// httpbin (PyPI) on gunicorn, a WSGI server nobody here wrote, on a free loopback port:
/// started and stopped by the test.
///
/// gunicorn's default (sync) worker answers every request with `Connection: close` and
/// closes the connection as soon as the response is written: the case that once failed
/// Ferry's uploads. `.ci/run` installs both into a virtual environment under `.build`
/// (`.build/httpbin-venv`); `FERRY_HTTPBIN_VENV` names another.
final class Httpbin: Sendable {
    /// The virtual environment's `gunicorn`, if it is installed.
    static let gunicorn: String? = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let venv =
            ProcessInfo.processInfo.environment["FERRY_HTTPBIN_VENV"]
            ?? root.appendingPathComponent(".build/httpbin-venv").path
        let path = venv + "/bin/gunicorn"
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    /// Set by CI: the httpbin tests must run, not be skipped.
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_HTTPBIN"] == "1" }
    static var enabled: Bool { gunicorn != nil || required }

    let port: Int
    private let pid: pid_t
    private let log: String

    init() async throws {
        let gunicorn = try #require(Self.gunicorn, "gunicorn + httpbin are not installed (see .ci/run)")
        port = try Nginx.freePort()
        log = FileManager.default.temporaryDirectory.appendingPathComponent("httpbin-\(port).log").path
        pid = try ProcessRunner.spawn(
            gunicorn,
            [
                "--bind", "127.0.0.1:\(port)", "--workers", "2", "--log-level", "warning", "--no-control-socket",
                // No worker timeout: gunicorn kills a worker silent for 30 s (a busy machine's
                // request, the worker's 500 then failing a test with nothing wrong). The tests
                // bound their own waits.
                "--timeout", "0",
                "httpbin:app",
            ],
            stdout: log,
            stderr: log
        )
        do {
            try await ProcessRunner.expectListening(pid: pid, port: port, server: "httpbin", logs: [log])
        } catch {
            unlink(log)
            throw error
        }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    func stop() {
        ProcessRunner.stop(pid)
        unlink(log)
    }
}

/// Runs `body` with a fresh httpbin, stopped afterwards.
func withHttpbin<Result>(_ body: (Httpbin) async throws -> Result) async throws -> Result {
    let httpbin = try await Httpbin()
    defer { httpbin.stop() }
    return try await body(httpbin)
}
