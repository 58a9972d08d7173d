import Ferry
import FerryBackground
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ferry daemon` under a service manager, without one: SIGTERM drains it (ServiceGroup), the
/// readiness protocol on a `NOTIFY_SOCKET` the test provides, and its Prometheus endpoint read
/// by the Prometheus client's own parser.
@Suite("ferry daemon as a service (real processes)", .serialized)
struct DaemonServiceTests {
    @Test func sigtermCheckpointsEveryTransferAndTheNextStartContinuesIt() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            // About 6 s of dripping: the SIGTERM comes in the middle.
            let size: Int64 = 8 << 20
            let path = "/bytes/\(size)?seed=5&drip=65536&interval=50"
            let output = daemon.directory.appendingPathComponent("drained.bin")
            let pid = try await daemon.start()
            let id = try #require(
                try await daemon.client.add(.init(url: server.url(path).absoluteString, destination: output.path)).id
            )
            try await daemon.waitUntil(id, received: 1 << 20)
            let seen = try await daemon.client.task(id).bytesReceived
            kill(pid, SIGTERM)
            let status = try await DaemonProcess.exitStatus(of: pid)
            #expect(status == 0, "the daemon exits normally after a SIGTERM")
            #expect(!FileManager.default.fileExists(atPath: daemon.socket.path), "its socket is removed")

            // Left queued, with a checkpoint of every byte it had when it stopped.
            let store = try BackgroundStore(directory: daemon.state)
            #expect(try store.task(id)?.state == .queued)
            let checkpoint = store.resumeData(for: BackgroundTaskRecord.resumeKey(for: id))?.bytesOnDisk ?? 0
            #expect(checkpoint >= seen, "the drain wrote a checkpoint of the bytes received (\(checkpoint) < \(seen))")
            let log = try String(contentsOf: daemon.directory.appendingPathComponent("daemon.err"), encoding: .utf8)
            #expect(log.contains("task \(id) stopped with the daemon at byte"))

            // The next start continues from that checkpoint.
            let before = server.requests(to: "/bytes/\(size)").count
            let restarted = try await daemon.start(log: "restarted")
            defer { DaemonProcess.killNine(restarted) }
            let final = try await finalState(of: id, daemon.client)
            #expect(final.state == .completed)
            let resumed = try #require(server.requests(to: "/bytes/\(size)").dropFirst(before).first)
            #expect(resumed.headers["range"] == "bytes=\(checkpoint)-")
            #expect(try Data(contentsOf: output) == TestContent.data(size: size, seed: 5))
        }
    }

    /// A Unix datagram socket of the test's own, as a service manager's `NOTIFY_SOCKET`.
    final class NotifySocket {
        let descriptor: Int32
        /// The value for `NOTIFY_SOCKET`.
        let name: String

        init(abstract: Bool, in directory: URL) throws {
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw POSIXError(.EIO) }
            let path =
                abstract
                ? "ferry-notify-\(UUID().uuidString.prefix(8))" : directory.appendingPathComponent("notify.sock").path
            name = abstract ? "@" + path : path
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = (abstract ? [0] : []) + Array(path.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) {
                for (index, byte) in bytes.enumerated() { $0[index] = byte }
            }
            let length = MemoryLayout.offset(of: \sockaddr_un.sun_path)! + bytes.count + (abstract ? 0 : 1)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(length)) }
            }
            guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
            var timeout = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(descriptor) }

        /// The next datagram, waiting at most `seconds`.
        func receive(within seconds: Int = 30) -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            for _ in 0..<seconds {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count > 0 { return String(decoding: buffer[..<count], as: UTF8.self) }
            }
            return nil
        }
    }

    @Test(arguments: [false, true])
    func readinessAndStoppingAreToldOnTheNotifySocket(abstract: Bool) async throws {
        let daemon = try DaemonProcess()
        let notify = try NotifySocket(abstract: abstract, in: daemon.directory)
        let pid = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            ["daemon"] + daemon.arguments,
            stdout: daemon.directory.appendingPathComponent("daemon.out").path,
            stderr: daemon.directory.appendingPathComponent("daemon.err").path,
            environment: ["NOTIFY_SOCKET": notify.name]
        )
        let ready = notify.receive()
        #expect(ready?.split(separator: "\n").first == "READY=1", "\(ready ?? "nothing")")
        // Ready means answering.
        #expect(try await daemon.client.health())
        kill(pid, SIGTERM)
        let stopping = notify.receive()
        #expect(stopping?.split(separator: "\n").first == "STOPPING=1", "\(stopping ?? "nothing")")
        #expect(try await DaemonProcess.exitStatus(of: pid) == 0)
    }

    static var prometheusClientEnabled: Bool {
        pythonCanImport("prometheus_client")
            || ProcessInfo.processInfo.environment["FERRY_REQUIRE_PROMETHEUS_CLIENT"] == "1"
    }

    /// The Prometheus client's parser (PyPI `prometheus_client`): every sample as
    /// `NAME{LABELS} VALUE`, labels sorted, one a line; it throws on text it cannot parse.
    static let parser = """
        import sys
        from prometheus_client.parser import text_string_to_metric_families
        for family in text_string_to_metric_families(sys.stdin.read()):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                print(f"{family.type} {sample.name}{{{labels}}} {sample.value}")
        """

    @Test(.enabled(if: prometheusClientEnabled))
    func prometheusReadsTheDaemonsMetricsBehindItsToken() async throws {
        try await withServer { server in
            let web = try await WebDaemon.started()
            defer { DaemonProcess.killNine(web.pid) }
            let output = web.daemon.directory.appendingPathComponent("small.bin")
            let id = try #require(
                try await web.daemon.client.add(
                    .init(url: server.url("/redirect/1?to=/bytes/300000").absoluteString, destination: output.path)
                ).id
            )
            #expect(try await finalState(of: id, web.daemon.client).state == .completed)
            // A failure too, so that the failures' counter is in the text.
            let missing = try #require(
                try await web.daemon.client.add(
                    .init(url: server.url("/status/404").absoluteString, destination: output.path + ".404")
                ).id
            )
            #expect(try await finalState(of: missing, web.daemon.client).state == .failed)

            #expect(try await web.curl("/metrics").status == 401, "no token, no metrics")
            #expect(try await web.curl("/metrics", ["-H", "Authorization: Bearer wrong"]).status == 401)
            let (status, text) = try await web.curl("/metrics", ["-H", "Authorization: Bearer \(web.token)"])
            #expect(status == 200)
            let scratch = web.daemon.directory.appendingPathComponent("metrics.txt")
            try Data(text.utf8).write(to: scratch)
            let parsed = try await ProcessRunner.run(
                "/bin/sh",
                ["-c", "python3 -c '\(Self.parser)' < '\(scratch.path)'"]
            )
            #expect(parsed.status == 0, "the parser refused the text: \(parsed.stderrText)")
            let samples = parsed.stdoutText.split(separator: "\n").map(String.init)
            let requests = "counter ferry_requests_total{method=GET,scheme=http,status_class="
            #expect(samples.contains(requests + "2xx,task_kind=download} 1"), "\(parsed.stdoutText)")
            #expect(samples.contains(requests + "3xx,task_kind=download} 1"))
            #expect(samples.contains("counter ferry_redirects_total{task_kind=download} 1"))
            #expect(samples.contains("counter ferry_tasks_total{outcome=success,task_kind=download} 1"))
            #expect(samples.contains("gauge ferry_daemon_tasks{state=completed} 1.0"))
            #expect(samples.contains("gauge ferry_daemon_tasks{state=running} 0.0"))
            #expect(samples.contains { $0.hasPrefix("histogram ferry_task_duration_seconds_count{") })
            #expect(samples.contains { $0.hasPrefix("counter ferry_task_failures_total{reason=") })
            #expect(!text.contains("127.0.0.1"), "no host in any label")
            // Every family has its HELP text: Prometheus's own linter finds nothing.
            #expect(text.contains("# HELP ferry_requests_total Requests sent"))
            if Self.promtoolEnabled {
                let lint = try await ProcessRunner.run("/bin/sh", ["-c", "promtool check metrics < '\(scratch.path)'"])
                #expect(lint.status == 0, "promtool: \(lint.stdoutText)\(lint.stderrText)")
            }
        }
    }

    /// Prometheus's `promtool` (Debian's `prometheus`), which lints the text as Prometheus
    /// reads it.
    static var promtoolEnabled: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/promtool")
            || ProcessInfo.processInfo.environment["FERRY_REQUIRE_PROMTOOL"] == "1"
    }
}
