import Ferry
import FerryBackground
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// One daemon per socket (issue 59, item 4). `ferry daemon --state-dir A --socket S &`
/// followed at once by `ferry ls --socket S` started a second daemon, with the default
/// state directory, on the same socket path: both ran, each with its own store. A daemon
/// now holds a claim beside its socket for its whole life, and a command given a socket
/// alone never starts one. Every wrongly started daemon would have the default state
/// directory, which these tests point into their own folder (`XDG_STATE_HOME`), so that
/// "exactly one daemon" is something they can check.
@Suite("One daemon per socket (real processes)", .serialized)
struct DaemonSocketTests {
    /// The environment of a command whose default state directory is `home`'s.
    private func defaults(in home: URL) -> [String: String] {
        ["XDG_STATE_HOME": home.path, "FERRY_STATE_DIR": "", "FERRY_SOCKET": ""]
    }

    /// Whether a daemon ran with the default state directory under `home`.
    private func aDefaultDaemonRan(in home: URL) -> Bool {
        FileManager.default.fileExists(atPath: home.appendingPathComponent("ferry/daemon.lock").path)
    }

    @Test func aCommandRightAfterADaemonStartsLeavesExactlyOneDaemon() async throws {
        let daemon = try DaemonProcess()
        let home = try makeTemporaryDirectory("daemon-home")
        // The race as the issue wrote it: the daemon is launched, and the command follows at
        // once, before the daemon has bound (or even claimed) its socket.
        let pid = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            ["daemon"] + daemon.arguments,
            stdout: daemon.directory.appendingPathComponent("daemon.out").path,
            stderr: daemon.directory.appendingPathComponent("daemon.err").path
        )
        defer { DaemonProcess.killNine(pid) }
        let listed = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["ls", "--socket", daemon.socket.path],
            environment: defaults(in: home)
        )
        #expect(listed.status == 0, "ls waited for the daemon that was starting: \(listed.stderrText)")
        #expect(await daemon.client.daemonPID() == pid, "the daemon that answers is the one launched")
        #expect(SocketClaim.owner(of: daemon.socket) == daemon.state.path)
        #expect(!aDefaultDaemonRan(in: home), "no second daemon, with the default state directory")
        #expect(DaemonProcess.isAlive(pid))
    }

    @Test func aSecondDaemonForAnOwnedSocketStopsAtOnceNamingTheOwner() async throws {
        let (daemon, pid) = try await DaemonProcess.started()
        defer { DaemonProcess.killNine(pid) }
        let other = try makeTemporaryDirectory("other-state")
        let second = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            ["daemon", "--state-dir", other.path, "--socket", daemon.socket.path],
            stdout: other.appendingPathComponent("out").path,
            stderr: other.appendingPathComponent("err").path
        )
        let status = try await DaemonProcess.exitStatus(of: second, within: 20)
        let stderr = (try? String(contentsOf: other.appendingPathComponent("err"), encoding: .utf8)) ?? ""
        #expect(status.map { ProcessRunner.exitStatus(fromWaitStatus: $0) } ?? 0 != 0, "it exited, with an error")
        #expect(stderr.contains(daemon.state.path), "the error names the owner's state directory: \(stderr)")
        // The owner goes on answering, its socket untouched.
        #expect(await daemon.client.daemonPID() == pid)
        #expect(SocketClaim.owner(of: daemon.socket) == daemon.state.path)
    }

    @Test func aCommandGivenASocketAloneNeverStartsADaemon() async throws {
        let daemon = try DaemonProcess()
        let home = try makeTemporaryDirectory("daemon-home")
        for command in [
            ["ls"], ["wait", "1"], ["pause", "1"], ["add", "--start-after", "60", "http://127.0.0.1:9/f"],
        ] {
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                command + ["--socket", daemon.socket.path],
                environment: defaults(in: home)
            )
            #expect(result.status != 0, "\(command)")
            #expect(result.stderrText.contains("No daemon answers"), "\(command): \(result.stderrText)")
        }
        #expect(!aDefaultDaemonRan(in: home))
        #expect(SocketClaim.owner(of: daemon.socket) == nil)
        #expect(!FileManager.default.fileExists(atPath: daemon.socket.path))
    }

    @Test func aClaimedSocketIsReleasedWhenItsDaemonDies() async throws {
        let (daemon, pid) = try await DaemonProcess.started()
        #expect(SocketClaim.owner(of: daemon.socket) == daemon.state.path)
        DaemonProcess.killNine(pid)
        // The kernel drops the claim with the process: a new daemon takes the socket.
        #expect(SocketClaim.owner(of: daemon.socket) == nil)
        let again = try await daemon.start(log: "again")
        defer { DaemonProcess.killNine(again) }
        #expect(await daemon.client.daemonPID() == again)
    }
}
