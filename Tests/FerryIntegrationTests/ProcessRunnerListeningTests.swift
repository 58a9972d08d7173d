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

    /// A table far longer than one read of `String(contentsOfFile:)` (about 4 KiB) is read whole.
    @Test func aTableIsReadWhole() throws {
        let others = try LoopbackListeners(count: 300)
        defer { others.close() }
        let listening = Set(
            (wholeTable("/proc/net/tcp") ?? "").split(separator: "\n").compactMap { line -> Int? in
                let fields = line.split(separator: " ")
                guard fields.count > 3, fields[3] == "0A", let port = fields[1].split(separator: ":").last else {
                    return nil
                }
                return Int(port, radix: 16)
            }
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
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { break }
            descriptors.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && listen(fd, 1) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else { break }
            ports.append(Int(UInt16(bigEndian: address.sin_port)))
        }
        self.descriptors = descriptors
        self.ports = ports
        guard ports.count == count else {
            close()
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    func close() {
        for fd in descriptors { Glibc.close(fd) }
    }
}
