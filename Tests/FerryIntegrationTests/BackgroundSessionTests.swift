import Ferry
import FerryBackground
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

final class QuietDelegate: SessionDelegate {}

/// `background-download` (Examples/BackgroundDownload): a program using a background session.
struct BackgroundProgram {
    let daemon: DaemonProcess
    let identifier: String
    var path: String { ProcessRunner.productsDirectory.appendingPathComponent("background-download").path }
    var arguments: [String] { ["--identifier", identifier] + daemon.arguments }

    func run(_ command: [String]) async throws -> ProcessResult {
        try await ProcessRunner.run(path, command + arguments)
    }

    /// The JSON lines it printed.
    static func lines(_ result: ProcessResult) -> [[String: String]] {
        result.stdoutText.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String]
        }
    }
}

@Suite("Background sessions (real processes)", .serialized)
struct BackgroundSessionTests {
    @Test func aClientThatExitsOrIsKilledGetsItsCompletionOnceInTheNextProcess() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let program = BackgroundProgram(daemon: daemon, identifier: "app.example.sync")
            // No daemon runs: the library starts one (a `ferry` beside the program).
            let first = try await program.run([
                "add", server.url("/bytes/1500000?seed=1").absoluteString, "--description", "a",
            ])
            #expect(first.status == 0, "\(first.stderrText)")
            let daemonPID = try #require(await daemon.client.daemonPID())
            defer { DaemonProcess.killNine(daemonPID) }
            // The second client is killed with -9 once the daemon has its download.
            let out = daemon.directory.appendingPathComponent("killed.out")
            let killed = try ProcessRunner.spawn(
                program.path,
                [
                    "add", server.url("/bytes/2500000?seed=2&drip=65536&interval=10").absoluteString, "--description",
                    "b", "--stay",
                ]
                    + program.arguments,
                stdout: out.path,
                stderr: daemon.directory.appendingPathComponent("killed.err").path
            )
            for _ in 0..<400 where !((try? String(contentsOf: out, encoding: .utf8)) ?? "").contains("handedOver") {
                try await Task.sleep(for: .milliseconds(25))
            }
            DaemonProcess.killNine(killed)
            // Both complete in the daemon with nobody attached.
            for _ in 0..<600 {
                let tasks = try await daemon.client.tasks(session: program.identifier)
                if tasks.count == 2, tasks.allSatisfy({ $0.state == .completed }) { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            // The next process receives each completion once, and moves the files.
            let moved = try makeTemporaryDirectory("moved")
            let attach = try await program.run(["attach", "--move-to", moved.path])
            #expect(attach.status == 0, "\(attach.stderrText)")
            let lines = BackgroundProgram.lines(attach)
            let finished = lines.filter { $0["event"] == "didFinishDownloadingTo" }
            #expect(finished.compactMap { $0["description"] }.sorted() == ["a", "b"])
            #expect(finished.allSatisfy { $0["location"]?.hasPrefix(daemon.state.path) == true })
            let completions = lines.filter { $0["event"] == "didComplete" }
            #expect(completions.count == 2)
            #expect(completions.allSatisfy { $0["error"] == "" })
            #expect(lines.last?["event"] == "didFinishEventsForBackgroundSession")
            let a =
                try Data(contentsOf: moved.appendingPathComponent("a")) == TestContent.data(size: 1_500_000, seed: 1)
            let b =
                try Data(contentsOf: moved.appendingPathComponent("b")) == TestContent.data(size: 2_500_000, seed: 2)
            #expect(a)
            #expect(b)
            // The session's directory no longer holds them.
            let left = try FileManager.default.contentsOfDirectory(
                atPath: daemon.state.appendingPathComponent("sessions/app.example.sync/downloads").path
            )
            #expect(left.isEmpty)
            // The store keeps the session: two tasks, nothing pending, attached.
            let sessions = try await daemon.client.sessions()
            #expect(sessions.map(\.identifier) == ["app.example.sync"])
            #expect(sessions.first?.tasks == 2)
            #expect(sessions.first?.pendingEvents == 0)
            #expect(sessions.first?.lastAttachedAt != nil)
            // Delivered once: a later process hears nothing more.
            let again = try await program.run(["attach", "--move-to", moved.path])
            #expect(
                BackgroundProgram.lines(again).filter { $0["event"] != "attached" }.map { $0["event"] } == [
                    "didFinishEventsForBackgroundSession"
                ]
            )
        }
    }

    @Test func aRunningTaskIsReattachedAndASecondProcessIsRefused() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let program = BackgroundProgram(daemon: daemon, identifier: "slow-sync")
            let url = server.url("/bytes/3000000?seed=3&drip=32768&interval=20").absoluteString
            #expect(try await program.run(["add", url, "--description", "slow"]).status == 0)
            let moved = try makeTemporaryDirectory("moved")
            let out = daemon.directory.appendingPathComponent("attach.out")
            let attached = try ProcessRunner.spawn(
                program.path,
                ["attach", "--move-to", moved.path] + program.arguments,
                stdout: out.path,
                stderr: daemon.directory.appendingPathComponent("attach.err").path
            )
            for _ in 0..<200 where !((try? String(contentsOf: out, encoding: .utf8)) ?? "").contains("attached") {
                try await Task.sleep(for: .milliseconds(25))
            }
            // While it is attached, another process of the same identifier is refused.
            let second = try await program.run(["attach", "--move-to", moved.path])
            #expect(second.status == 2)
            #expect(second.stderrText.contains("Another process is attached"))
            // The reattached task completes in the first one, live.
            var status: Int32 = 0
            for _ in 0..<600 where waitpid(attached, &status, WNOHANG) == 0 {
                try await Task.sleep(for: .milliseconds(50))
            }
            let lines = ((try? String(contentsOf: out, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: String]
            }
            #expect(lines.first { $0["event"] == "attached" }?["tasks"] == "slow")
            #expect(lines.filter { $0["event"] == "didFinishDownloadingTo" }.count == 1)
            let same =
                try Data(contentsOf: moved.appendingPathComponent("slow")) == TestContent.data(size: 3_000_000, seed: 3)
            #expect(same)
        }
    }

    @Test func dataTasksAreRefusedAndIdentifiersChecked() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            var configuration = daemon.backgroundConfiguration(identifier: "refusals")
            configuration.backgroundDaemon.startsDaemon = false
            let session = try Session(configuration: configuration, delegate: QuietDelegate())
            await #expect {
                try await session.data(from: server.url("/bytes/10"))
            } throws: { error in
                (error as? FerryError)?.reason == .unsupportedConfiguration
            }
            // Same identifier in the same process, with a delegate: refused too; without one
            // (it only hands tasks over), allowed.
            #expect(throws: FerryError.self) { try Session(configuration: configuration, delegate: QuietDelegate()) }
            #expect(throws: Never.self) { try Session(configuration: configuration) }
            session.invalidateAndCancel()
            #expect(throws: FerryError.self) { try Session(configuration: .background(identifier: "no spaces")) }
        }
    }
}

@Suite("Background tasks in this process")
struct BackgroundTaskControlTests {
    /// `waitUntilInDaemon()` for a task that never reaches the daemon (never resumed: nothing
    /// would ever store it) comes back `.cancelled` when its Swift task is cancelled; the
    /// task itself is left as it was. Before, it waited for ever.
    @Test func waitingForTheDaemonHonoursItsSwiftTasksCancellation() async throws {
        let daemon = try DaemonProcess()
        // Started and stopped here, and never launched by the session: one it launched
        // outlived the test (an idle `ferry daemon` left behind by every run of the suite).
        let pid = try await daemon.start()
        defer { DaemonProcess.killNine(pid) }
        var configuration = daemon.backgroundConfiguration(identifier: "never")
        configuration.backgroundDaemon.startsDaemon = false
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let task = session.downloadTask(with: URL(string: "http://127.0.0.1:9/never")!)
        let waiter = Task { await thrownError { try await task.waitUntilInDaemon() } as? FerryError }
        waiter.cancel()
        let error = await finishing(within: 60) { await waiter.value }
        #expect(error??.reason == .cancelled, "\(String(describing: error))")
        #expect(task.state == .suspended)
    }

    @Test func suspendAndResumePauseAndResumeTheDaemonsTask() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let configuration = daemon.backgroundConfiguration(identifier: "control")
            let session = try Session(configuration: configuration, delegate: QuietDelegate())
            let task = session.downloadTask(with: server.url("/bytes/1500000?seed=4&drip=16384&interval=20"))
            task.resume()
            try await task.waitUntilInDaemon()
            // Suspended once the daemon has bytes of it (a loaded machine starts it later).
            for _ in 0..<500 {
                if let running = try await daemon.client.tasks(session: "control").first, running.bytesReceived > 0 {
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            task.suspend()
            var record = try #require(try await daemon.client.tasks(session: "control").first)
            for _ in 0..<100 where record.state != .paused {
                try await Task.sleep(for: .milliseconds(20))
                record = try #require(try await daemon.client.tasks(session: "control").first)
            }
            #expect(record.state == .paused)
            #expect(record.bytesReceived > 0)
            task.resume()
            let events = task.events
            for await event in events {
                if case .completed = event { break }
            }
            #expect(task.error == nil)
            #expect(try await daemon.client.tasks(session: "control").first?.state == .completed)
            // It continued with a range rather than starting over.
            #expect(server.requests(to: "/bytes/1500000").compactMap { $0.headers["range"] }.count == 1)
            session.invalidateAndCancel()
        }
    }
}

@Suite("Background uploads")
struct BackgroundUploadTests {
    @Test func anUploadFromAFileRunsInTheDaemon() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let file = daemon.directory.appendingPathComponent("upload.bin")
            try TestContent.data(size: 700_000, seed: 9).write(to: file)
            let configuration = daemon.backgroundConfiguration(identifier: "uploads")
            let session = try Session(configuration: configuration, delegate: QuietDelegate())
            var request = URLRequest(url: server.url("/sink"))
            request.httpMethod = "PUT"
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
            let (data, response) = try await session.upload(for: request, fromFile: file)
            #expect(response.statusCode == 200)
            #expect(response.headers["Content-Type"] == "application/json")
            let sink = try JSONDecoder().decode(SinkReport.self, from: data)
            #expect(sink.method == "PUT")
            #expect(sink.bytes == 700_000)
            #expect(sink.sha256 == TestContent.sha256(size: 700_000, seed: 9))
            // The daemon ran it: its record says so, and the response file is gone.
            let record = try #require(try await daemon.client.tasks(session: "uploads").first)
            #expect(record.kind == .upload)
            #expect(record.responseStatus == 200)
            #expect(!FileManager.default.fileExists(atPath: record.destination))
            // A data task in memory is still refused.
            await #expect(throws: FerryError.self) {
                try await session.upload(for: request, from: Data("x".utf8))
            }
            session.invalidateAndCancel()
        }
    }
}
