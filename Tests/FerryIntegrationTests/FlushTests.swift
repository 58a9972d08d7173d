import Foundation
import Testing

/// How often a download asks for its bytes to reach the disk. Each `fsync` of the partial
/// file is a request to the device to empty its cache (on ext4 even when nothing changed
/// since the last one), so a complete download flushes it once, not once more as it closes.
@Suite("Flushing a download (the real executable, traced)")
struct FlushTests {
    static var strace: Bool {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/strace")
            || ProcessInfo.processInfo.environment["CI"] == "true"
    }

    @Test(.enabled(if: Nginx.enabled && strace))
    func aCompleteDownloadFlushesItsPartialFileOnce() async throws {
        let root = try makeTemporaryDirectory("flush-root")
        let bytes = Data((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })
        try bytes.write(to: root.appendingPathComponent("file.bin"))
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let directory = try makeTemporaryDirectory("flush")
        let output = directory.appendingPathComponent("file.bin")
        let trace = directory.appendingPathComponent("fsync.trace")
        let traced = try await ProcessRunner.run(
            "/usr/bin/strace",
            [
                "-f", "-qq", "-y", "-e", "trace=fsync,fdatasync", "-o", trace.path,
                ProcessRunner.ferry, "get", "--quiet", "-o", output.path,
                "http://127.0.0.1:\(nginx.port)/file.bin",
            ]
        )
        #expect(traced.status == 0, "\(traced.stderrText)")
        #expect(try Data(contentsOf: output) == bytes)
        let calls = try String(contentsOf: trace, encoding: .utf8).split(separator: "\n")
            .filter { $0.contains("sync(") }
        let partial = calls.filter { $0.contains(".partial>") }
        #expect(partial.count == 1, "\(calls)")
    }
}
