import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The harness's own wait for a server: it ends on what the server process does, and says so.
@Suite struct ProcessRunnerListeningTests {
    @Test func aServerThatExitsEndsTheWaitWithItsStatusAndOutput() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("exits-\(getpid()).log").path
        defer { unlink(log) }
        let port = try Nginx.freePort()
        let pid = try ProcessRunner.spawn("/bin/sh", ["-c", "echo no such module; exit 3"], stdout: log, stderr: log)
        let error = await #expect(throws: NSError.self) {
            try await ProcessRunner.expectListening(pid: pid, port: port, server: "the server", logs: [log])
        }
        #expect(error?.localizedDescription == "the server did not start (exited(3)): no such module\n")
    }
}
