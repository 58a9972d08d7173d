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

    @Test func aServerThatListensAmongHundredsOfSocketsEndsTheWait() async throws {
        let others = try LoopbackListeners(count: 300)
        defer { others.close() }
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("listens-\(getpid()).log").path
        defer { unlink(log) }
        let port = try Nginx.freePort()
        let pid = try ProcessRunner.spawn(
            "/usr/bin/env",
            [
                "python3", "-c",
                "import socket,time; s=socket.socket(); s.bind(('127.0.0.1', \(port))); s.listen(); time.sleep(600)",
            ],
            stdout: log,
            stderr: log
        )
        defer { ProcessRunner.stop(pid) }
        #expect(await ProcessRunner.waitUntilListening(pid: pid, port: port) == .listening)
        #expect(!ProcessRunner.listens(pid: pid, port: others.ports[0]))
    }

    /// A process reaped by someone else (no longer this process's child, no longer alive) ends
    /// the wait at once; before, `waitpid`'s `ECHILD` was taken for "still running", and the
    /// wait ran its minute out.
    @Test func aProcessReapedElsewhereEndsTheWait() async throws {
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("reaped-\(getpid()).log").path
        defer { unlink(log) }
        let port = try Nginx.freePort()
        let pid = try ProcessRunner.spawn("/bin/sh", ["-c", "exit 0"], stdout: log, stderr: log)
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)
        #expect(await ProcessRunner.waitUntilListening(pid: pid, port: port) == .gone)
    }

    /// A table far longer than one read of `String(contentsOfFile:)` (about 4 KiB) is read whole.
    @Test func aTableIsReadWhole() throws {
        let others = try LoopbackListeners(count: 300)
        defer { others.close() }
        let listening = Set(
            TCPTableSocket.all(in: ["/proc/net/tcp"]).filter { $0.state == TCPTableSocket.listening }.map(\.localPort)
        )
        let missing = others.ports.filter { !listening.contains($0) }
        #expect(missing.isEmpty, "\(missing.count) of the \(others.ports.count) listening sockets missing")
    }
}

/// Sockets listening on 127.0.0.1 at ports the kernel chose: a long `/proc/net/tcp`.
private struct LoopbackListeners {
    let descriptors: [Int32]
    let ports: [Int]

    init(count: Int) throws {
        var descriptors: [Int32] = []
        var ports: [Int] = []
        do {
            for _ in 0..<count {
                let (descriptor, port) = try boundLoopbackSocket()
                descriptors.append(descriptor)
                guard listen(descriptor, 1) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                ports.append(port)
            }
        } catch {
            for descriptor in descriptors { Glibc.close(descriptor) }
            throw error
        }
        self.descriptors = descriptors
        self.ports = ports
    }

    func close() {
        for fd in descriptors { Glibc.close(fd) }
    }
}
