import Ferry
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A real nginx on a free loopback port, serving a directory; started and stopped by the test.
final class Nginx {
    static let binary = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_NGINX"] == "1" }
    /// Whether tests that need nginx run: it is installed, or required (then a missing one fails).
    static var enabled: Bool { binary != nil || required }

    let port: Int
    let prefix: URL
    private let pid: pid_t

    /// The access log, when the server was started with one: one line a request, ending in
    /// the body bytes nginx sent (`$body_bytes_sent`).
    var accessLog: URL { prefix.appendingPathComponent("access.log") }

    /// Starts nginx serving `root`, with `server` added inside its `server { }` block
    /// (locations, limits, auth) and an access log of method, URI, status and bytes sent.
    /// `listen` is added to the listen directive (`ssl http2`); a server block may log with
    /// the `connections` format instead (`$connection $server_protocol $status`), or the
    /// `protocols` format (`$server_protocol $request_method $uri $status $http_range
    /// [$http_authorization] $connection`). A `reloadable` server runs a master process, for ``reload()``,
    /// whose old worker closes its connections 100 ms after a reload.
    init(
        serving root: URL,
        server extra: String = "",
        listen options: String = "",
        reloadable: Bool = false
    ) async throws {
        let binary = try #require(Self.binary, "nginx is not installed (apt-get install nginx-light)")
        prefix = try makeTemporaryDirectory("nginx")
        port = try Self.freePort()
        try FileManager.default.createDirectory(
            at: prefix.appendingPathComponent("tmp"),
            withIntermediateDirectories: true
        )
        let temp = prefix.appendingPathComponent("tmp").path
        let configuration = """
            daemon off;
            master_process \(reloadable ? "on" : "off");
            \(reloadable ? "worker_shutdown_timeout 100ms;" : "")
            worker_processes 1;
            \(geteuid() == 0 ? "user root;" : "")
            error_log \(prefix.path)/error.log;
            pid \(prefix.path)/nginx.pid;
            events { worker_connections 64; }
            http {
                log_format ferry '$request_method $request_uri $status $body_bytes_sent';
                log_format connections '$connection $server_protocol $status';
                log_format protocols '$server_protocol $request_method $uri $status $http_range [$http_authorization] $connection';
                access_log \(prefix.path)/access.log ferry;
                sendfile on;
                client_body_temp_path \(temp);
                proxy_temp_path \(temp);
                fastcgi_temp_path \(temp);
                uwsgi_temp_path \(temp);
                scgi_temp_path \(temp);
                server { listen 127.0.0.1:\(port)\(options.isEmpty ? "" : " " + options); root \(root.path); \(extra) }
            }
            """
        let file = prefix.appendingPathComponent("nginx.conf")
        try configuration.write(to: file, atomically: true, encoding: .utf8)
        let log = prefix.appendingPathComponent("error.log").path
        pid = try ProcessRunner.spawn(
            binary,
            ["-p", prefix.path, "-c", file.path, "-e", log],
            stdout: log + ".out",
            stderr: log + ".err"
        )
        do {
            try await ProcessRunner.expectListening(pid: pid, port: port, server: "nginx", logs: [log, log + ".err"])
        } catch {
            try? FileManager.default.removeItem(at: prefix)
            throw error
        }
    }

    /// Reloads the configuration, as `nginx -s reload` does (a server started `reloadable`):
    /// a new worker takes new connections; the old one sends GOAWAY on its HTTP/2
    /// connections and closes every connection 100 ms later.
    func reload() {
        kill(pid, SIGHUP)
    }

    func stop() {
        ProcessRunner.stop(pid)
        try? FileManager.default.removeItem(at: prefix)
    }

    /// A free port for a server started as another process, which binds it later.
    ///
    /// Chosen below the kernel's ephemeral range (`ip_local_port_range`, 32768 and up here),
    /// where no `bind(port 0)` of another test (the in-process servers, a proxy) can take it
    /// between this check and the server's own bind: a port the kernel handed out and took
    /// back once went to such a server, and httpbin's test talked to it.
    static func freePort() throws -> Int {
        let low = ephemeralRange.lowerBound
        for _ in 0..<200 {
            let port = Int.random(in: max(1024, low - 12_000)..<low)
            if canBind(port) { return port }
        }
        throw NSError(domain: "port", code: Int(EADDRINUSE))
    }

    /// The kernel's ephemeral ports (where `bind(port 0)` takes them from).
    static let ephemeralRange: ClosedRange<Int> = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let bounds = text.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        return bounds.count == 2 && bounds[0] <= bounds[1] ? bounds[0]...bounds[1] : 32768...60999
    }()

    private static func canBind(_ port: Int) -> Bool {
        withLoopbackSocket(port: port) { bind($0, $1, $2) == 0 }
    }

    /// Runs `call` (a bind) with a new TCP socket and 127.0.0.1:`port`; closes the
    /// socket afterwards.
    private static func withLoopbackSocket(
        port: Int,
        _ call: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                call(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}

@Suite("Against a real nginx", .serialized, .enabled(if: Nginx.enabled))
struct NginxTests {
    /// The core issue's check: 1 GiB with `ferry get`, byte-identical, under 64 MiB resident.
    @Test func oneGibibyteDownloadIsIdenticalInBoundedMemory() async throws {
        let root = try makeTemporaryDirectory("nginx-root")
        let output = try makeTemporaryDirectory("nginx-out").appendingPathComponent("big.bin")
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: output.deletingLastPathComponent())
        }
        let source = root.appendingPathComponent("big.bin")
        try await makeRandomFile(source, mebibytes: 1024)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }

        let result = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "--quiet", "-o", output.path, "http://127.0.0.1:\(nginx.port)/big.bin"]
        )
        #expect(result.status == 0, "\(result.stderrText)")
        let attributes = try FileManager.default.attributesOfItem(atPath: output.path)
        #expect((attributes[.size] as? NSNumber)?.int64Value == 1 << 30)
        #expect(try await sha256(of: output) == sha256(of: source))
        // A real sample (a process of this size is never under 1 MiB), and under 64 MiB.
        #expect(result.maxResidentKiB > 1024, "the peak RSS was not measured")
        #expect(result.maxResidentKiB < 64 * 1024, "peak RSS \(result.maxResidentKiB) KiB")
        print("ferry get 1 GiB from nginx: peak RSS \(result.maxResidentKiB / 1024) MiB")
    }

    @Test func missingFileFromNginxLeavesNothing() async throws {
        let root = try makeTemporaryDirectory("nginx-root")
        defer { try? FileManager.default.removeItem(at: root) }
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let output = root.appendingPathComponent("out.bin")
        let result = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-o", output.path, "http://127.0.0.1:\(nginx.port)/missing"]
        )
        #expect(result.status == 22)
        #expect(result.stderrText.contains("404"))
        #expect(!FileManager.default.fileExists(atPath: output.path))
    }
}
