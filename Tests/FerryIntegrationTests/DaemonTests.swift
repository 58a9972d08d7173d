import Ferry
import FerryBackground
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `ferry daemon` process with its own state directory and socket.
struct DaemonProcess {
    let directory: URL
    var state: URL { directory.appendingPathComponent("state", isDirectory: true) }
    var socket: URL { state.appendingPathComponent("daemon.sock") }
    var arguments: [String] { ["--state-dir", state.path, "--socket", socket.path] }
    var client: BackgroundClient { BackgroundClient(socket: socket) }

    init() throws { directory = try makeTemporaryDirectory("daemon") }

    /// A background session's configuration that uses this daemon.
    func backgroundConfiguration(identifier: String) -> SessionConfiguration {
        var configuration = SessionConfiguration.background(identifier: identifier)
        configuration.backgroundDaemon.stateDirectory = state
        configuration.backgroundDaemon.socket = socket
        return configuration
    }

    /// Starts the daemon (with `options` added) and waits until it answers. Its log (standard
    /// error) goes to `LOG.err` in ``directory``.
    func start(_ options: [String] = [], log: String = "daemon") async throws -> pid_t {
        let pid = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            ["daemon"] + arguments + options,
            stdout: directory.appendingPathComponent("\(log).out").path,
            stderr: directory.appendingPathComponent("\(log).err").path
        )
        for _ in 0..<200 {
            if try await client.health() { return pid }
            try await Task.sleep(for: .milliseconds(25))
        }
        kill(pid, SIGKILL)
        Issue.record("The daemon did not answer within 5 s.")
        throw CancellationError()
    }

    /// Runs a `ferry` command against this daemon.
    func ferry(_ arguments: [String]) async throws -> ProcessResult {
        try await ProcessRunner.run(ProcessRunner.ferry, arguments + self.arguments)
    }

    static func killNine(_ pid: pid_t) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// Waits (bounded) for `pid` to exit: its wait status, or `nil` (and it is killed) if it
    /// did not within `seconds`.
    static func exitStatus(of pid: pid_t, within seconds: Int = 20) async throws -> Int32? {
        var status: Int32 = 0
        for _ in 0..<(seconds * 50) {
            if waitpid(pid, &status, WNOHANG) == pid { return status }
            try await Task.sleep(for: .milliseconds(20))
        }
        killNine(pid)
        return nil
    }

    /// Whether `pid` is still running (not exited or killed).
    static func isAlive(_ pid: pid_t) -> Bool {
        var status: Int32 = 0
        return waitpid(pid, &status, WNOHANG) == 0
    }
}

extension DaemonProcess {
    /// A new daemon (with `options`), started; the caller stops it with `killNine`.
    static func started(_ options: [String] = []) async throws -> (DaemonProcess, pid_t) {
        let daemon = try DaemonProcess()
        return (daemon, try await daemon.start(options))
    }

    /// `ferry add` with `arguments`; the new task's id.
    func add(_ arguments: [String]) async throws -> Int64 {
        let added = try await ferry(["add"] + arguments)
        return try #require(
            Int64(added.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)),
            "\(added.stderrText)"
        )
    }

    /// Returns once task `id` has received `bytes` (polled; a loaded machine starts late: a
    /// debug daemon under the whole suite took 11 s to start a task, past the 10 s this
    /// waited before, and a test then went on before its task had begun). Records an issue
    /// if 60 s pass first.
    func waitUntil(
        _ id: Int64,
        received bytes: Int64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        for _ in 0..<6000 {
            if try await client.task(id).bytesReceived >= bytes { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("task \(id) did not receive \(bytes) bytes within 60 s", sourceLocation: sourceLocation)
    }
}

/// Polls the daemon until task `id` is in a final state (or 60 s pass).
func finalState(of id: Int64, _ client: BackgroundClient) async throws -> BackgroundTaskRecord {
    for _ in 0..<1200 {
        let task = try await client.task(id)
        if task.state.isFinal { return task }
        try await Task.sleep(for: .milliseconds(50))
    }
    return try await client.task(id)
}

@Suite("ferry daemon (real processes)", .serialized)
struct DaemonTests {
    @Test func addWaitListPauseResumeCancel() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let output = daemon.directory.appendingPathComponent("out/file.bin")
            let add = try await daemon.ferry(["add", server.url("/bytes/3000000").absoluteString, "-o", output.path])
            #expect(add.status == 0, "\(add.stderrText)")
            let id = try #require(Int64(add.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)))
            let wait = try await daemon.ferry(["wait", "-q", "\(id)"])
            #expect(wait.status == 0, "\(wait.stderrText)")
            let same = try Data(contentsOf: output) == TestContent.data(size: 3_000_000)
            #expect(same)
            let list = try await daemon.ferry(["ls", "--json"])
            let rows = try JSONSerialization.jsonObject(with: list.stdout) as? [[String: Any]]
            #expect(rows?.first?["state"] as? String == "completed")
            #expect(rows?.first?["bytesReceived"] as? Int == 3_000_000)

            // A slow one: paused (kept), resumed (continues with a range), completed.
            // It stalls at 1,000,000 bytes until the client leaves: the pause always comes
            // before the end, however slowly this machine runs. (The resume asks for a range,
            // which is not held up.)
            let slow = server.url("/bytes/2000000?drip=16384&interval=40&stall-at=1000000").absoluteString
            let slowFile = daemon.directory.appendingPathComponent("slow.bin")
            let slowID = try await daemon.add([slow, "-o", slowFile.path])
            // Paused once some of it arrived (polled: a loaded machine starts it later).
            for _ in 0..<500 where try await daemon.client.task(slowID).bytesReceived == 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            let paused = try await daemon.ferry(["pause", "\(slowID)"])
            #expect(paused.stdoutText.contains("paused"))
            let kept = try await daemon.client.task(slowID)
            #expect(kept.state == .paused)
            #expect(kept.bytesReceived > 0)
            #expect(!FileManager.default.fileExists(atPath: slowFile.path))
            #expect(try await daemon.ferry(["resume", "\(slowID)"]).status == 0)
            #expect(try await daemon.ferry(["wait", "-q", "\(slowID)"]).status == 0)
            let slowSame = try Data(contentsOf: slowFile) == TestContent.data(size: 2_000_000)
            #expect(slowSame)
            let ranges = server.requests(to: "/bytes/2000000").compactMap { $0.headers["range"] }
            #expect(ranges.count == 1)
            #expect(ranges.first.map { $0.hasPrefix("bytes=") && $0 != "bytes=0-" } == true)

            // Cancelled: no file, a non-zero wait.
            let doomedFile = daemon.directory.appendingPathComponent("doomed.bin")
            let doomed = try await daemon.add([slow, "-o", doomedFile.path])
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await daemon.ferry(["cancel", "\(doomed)"]).status == 0)
            #expect(try await daemon.ferry(["wait", "-q", "\(doomed)"]).status != 0)
            #expect(!FileManager.default.fileExists(atPath: doomedFile.path))
            #expect(try await daemon.client.task(doomed).state == .canceled)
        }
    }

    /// Issue 14.3: a session waiting for its events asks once and is answered when the event
    /// is recorded (a long poll), instead of asking again and again.
    @Test func aLongPollIsAnsweredByTheNextEvent() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started()
            defer { DaemonProcess.killNine(pid) }
            let client = daemon.client
            let waiting = Task { try await client.events(session: "longpoll", after: 0, wait: .seconds(30)) }
            let added = try await client.add(
                BackgroundAPI.AddTask(
                    url: server.url("/bytes/1000").absoluteString,
                    destination: daemon.directory.appendingPathComponent("polled.bin").path,
                    session: "longpoll"
                )
            )
            // A daemon that did not wait would have answered "no events" before the task ended.
            let events = try await waiting.value
            #expect(events.map(\.taskId) == [try #require(added.id)])
            #expect(events.first?.kind == .completed)
            let later = try await client.events(session: "longpoll", after: events.last?.seq ?? 0)
            #expect(later.isEmpty)
        }
    }

    @Test func killNineTwentyTimesOverOneDownloadLosesNothing() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            // About 16 s of dripping, so that most of the twenty kills come before the end.
            let size: Int64 = 20 << 20
            let path = "/bytes/\(size)?drip=65536&interval=50"
            let output = daemon.directory.appendingPathComponent("big.bin")
            var pid = try await daemon.start()
            let id = try await daemon.client.add(.init(url: server.url(path).absoluteString, destination: output.path))
                .id
            let taskID = try #require(id)
            // The kills start once a first checkpoint exists: before it, a restart starts over,
            // and rounds shorter than the checkpoint interval (the daemon answers before its
            // transfers start, and a loaded machine starts it slowly) could keep it from ever
            // writing one.
            for _ in 0..<1000 {
                let stored =
                    try BackgroundStore(directory: daemon.state)
                    .resumeData(for: BackgroundTaskRecord.resumeKey(for: taskID))?.bytesOnDisk ?? 0
                if stored > 0 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            var checkedRestarts = 0
            for round in 0..<20 {
                try await Task.sleep(for: .milliseconds(Int.random(in: 300...1500)))
                DaemonProcess.killNine(pid)
                let store = try BackgroundStore(directory: daemon.state)
                let checkpoint = store.resumeData(for: BackgroundTaskRecord.resumeKey(for: taskID))?.bytesOnDisk ?? 0
                let ended = try store.task(taskID)?.state.isFinal == true
                let before = server.requests(to: "/bytes/\(size)").count
                pid = try await daemon.start()
                // Finished before this kill (a slow machine's rounds are long): nothing to resume.
                if ended { break }
                if checkpoint > 0 {
                    // The first request after the restart continues at the checkpoint.
                    var resumed: FerryTestServer.LoggedRequest?
                    for _ in 0..<100 where resumed == nil {
                        resumed = server.requests(to: "/bytes/\(size)").dropFirst(before).first
                        if resumed == nil { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    let range = try #require(resumed?.headers["range"], "round \(round): no range after a checkpoint")
                    let start = Int64(range.dropFirst("bytes=".count).prefix { $0.isNumber }) ?? -1
                    #expect(start >= checkpoint, "round \(round): \(range) before the checkpoint \(checkpoint)")
                    #expect(resumed?.headers["if-range"]?.isEmpty == false)
                    checkedRestarts += 1
                }
            }
            defer { DaemonProcess.killNine(pid) }
            let final = try await finalState(of: taskID, daemon.client)
            #expect(final.state == .completed)
            #expect(checkedRestarts >= 5)
            let file = try Data(contentsOf: output)
            #expect(file.count == Int(size))
            let same = file == TestContent.data(size: size)
            #expect(same)
            // Exactly one completion event, whatever the kills.
            let events = try BackgroundStore(directory: daemon.state).events(session: "cli", after: 0)
            #expect(events.filter { $0.taskId == taskID }.map(\.kind) == [.completed])
        }
    }

    /// `ferry ls`, `wait`, `pause`… failed at once when no daemon answered (one restarting
    /// and still binding its socket, or none at all). They now wait for it, or start it as
    /// `ferry add` does; and `ferry wait` rides through the daemon killed under it.
    @Test func commandsWaitForOrStartTheDaemon() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            // No daemon: `ferry ls` starts one and lists nothing.
            let listed = try await daemon.ferry(["ls"])
            #expect(listed.status == 0, "\(listed.stderrText)")
            let first = try #require(await daemon.client.daemonPID(), "ferry ls started no daemon")
            let output = daemon.directory.appendingPathComponent("slow.bin")
            let size: Int64 = 2_000_000
            let added = try await daemon.client.add(
                .init(url: server.url("/bytes/\(size)?drip=65536&interval=50").absoluteString, destination: output.path)
            )
            let id = try #require(added.id)
            try await daemon.waitUntil(id, received: 1)
            // The daemon dies under a waiting `ferry wait`: it starts another and goes on.
            let waiter = Task { try await daemon.ferry(["wait", "-q", String(id)]) }
            kill(first, SIGKILL)
            let waited = try await waiter.value
            #expect(waited.status == 0, "\(waited.stderrText)")
            let second = try #require(await daemon.client.daemonPID())
            defer { kill(second, SIGKILL) }
            #expect(second != first)
            #expect(try await daemon.client.task(id).state == .completed)
            #expect(try Data(contentsOf: output) == TestContent.data(size: size))
            // `ferry pause` on a finished task: the daemon's answer, not a connection error.
            let paused = try await daemon.ferry(["pause", String(id)])
            #expect(!paused.stderrText.contains("No daemon answers"), "\(paused.stderrText)")
        }
    }

    @Test func schedulingSurvivesARestart() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            var pid = try await daemon.start()
            let file = { (name: String) in daemon.directory.appendingPathComponent(name).path }
            // Not before two seconds from now, even across a kill -9 and a restart.
            var later = BackgroundAPI.AddTask(
                url: server.url("/bytes/1000?seed=5").absoluteString,
                destination: file("later")
            )
            let earliest = Date(timeIntervalSinceNow: 2)
            later.earliestBeginDate = earliest
            let laterID = try #require(try await daemon.client.add(later).id)
            // States, not a window: what is seen before the date must be "queued", however
            // long the machine takes to restart the daemon; the request itself is checked
            // against the date it was received at.
            let before = try await daemon.client.task(laterID).state
            if Date() < earliest { #expect(before == .queued) }
            DaemonProcess.killNine(pid)
            pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let afterRestart = try await daemon.client.task(laterID).state
            if Date() < earliest { #expect(afterRestart == .queued) }
            let done = try await finalState(of: laterID, daemon.client)
            #expect(done.state == .completed)
            #expect(try #require(done.finishedAt).timeIntervalSince(earliest) >= 0)
            let asked = server.requests(to: "/bytes/1000?seed=5")
            #expect(!asked.isEmpty)
            // (The date travels as text with milliseconds: a hundredth of a second of slack.)
            #expect(asked.allSatisfy { $0.receivedAt >= earliest - 0.01 }, "no request before the date")
        }
    }

    @Test func higherPriorityStartsFirst() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try ProcessRunner.spawn(
                ProcessRunner.ferry,
                ["daemon", "--max-transfers", "1"] + daemon.arguments,
                stdout: daemon.directory.appendingPathComponent("out").path,
                stderr: daemon.directory.appendingPathComponent("err").path
            )
            defer { DaemonProcess.killNine(pid) }
            for _ in 0..<200 where !(try await daemon.client.health()) { try await Task.sleep(for: .milliseconds(25)) }
            let file = { (name: String) in daemon.directory.appendingPathComponent(name).path }
            // One slot: a slow task holds it while two more wait.
            _ = try await daemon.client.add(
                .init(
                    url: server.url("/bytes/200000?drip=50000&interval=100").absoluteString,
                    destination: file("first")
                )
            )
            var low = BackgroundAPI.AddTask(
                url: server.url("/bytes/10?seed=6").absoluteString,
                destination: file("low")
            )
            low.priority = 0.1
            var high = BackgroundAPI.AddTask(
                url: server.url("/bytes/10?seed=7").absoluteString,
                destination: file("high")
            )
            high.priority = 0.9
            let lowID = try #require(try await daemon.client.add(low).id)
            let highID = try #require(try await daemon.client.add(high).id)
            let lowDone = try await finalState(of: lowID, daemon.client)
            let highDone = try await finalState(of: highID, daemon.client)
            #expect(try #require(highDone.finishedAt) <= (try #require(lowDone.finishedAt)))
            let order = server.requests.map(\.uri).filter { $0.hasPrefix("/bytes/10?") }
            #expect(order == ["/bytes/10?seed=7", "/bytes/10?seed=6"])
        }
    }

    @Test func badInputNeverStopsTheDaemon() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            let pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let socket = daemon.socket.path
            func post(_ target: String, _ body: String) -> (status: Int, body: String) {
                let request =
                    "POST \(target) HTTP/1.1\r\nHost: d\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
                let reply = String(decoding: UnixSocket.exchange(socket, Array(request.utf8)), as: UTF8.self)
                let status = Int(reply.split(separator: " ").dropFirst().first ?? "") ?? 0
                return (status, reply)
            }
            let destination = daemon.directory.appendingPathComponent("x.bin").path
            let url = server.url("/bytes/10").absoluteString
            #expect(post("/v1/tasks", "{not json").status == 400)
            #expect(post("/v1/tasks", "[]").status == 400)
            let unknown = post("/v1/tasks", #"{"url":"\#(url)","destination":"\#(destination)","color":"red"}"#)
            #expect(unknown.status == 400)
            #expect(unknown.body.contains("color"))
            #expect(post("/v1/tasks", #"{"url":"\#(url)"}"#).status == 400)
            #expect(post("/v1/tasks", #"{"url":42,"destination":"\#(destination)"}"#).status == 400)
            #expect(post("/v1/tasks", #"{"url":"ftp://x/y","destination":"\#(destination)"}"#).status == 400)
            #expect(post("/v1/tasks", #"{"url":"\#(url)","destination":"relative/x"}"#).status == 400)
            #expect(
                post("/v1/tasks", #"{"url":"\#(url)","destination":"\#(daemon.directory.path)/../../etc/x"}"#).status
                    == 400
            )
            #expect(post("/v1/tasks", #"{"url":"\#(url)","destination":"/etc/ferry-forbidden"}"#).status == 403)
            #expect(
                post("/v1/tasks", #"{"url":"\#(url)","destination":"\#(destination)","headers":{"X":"a\r\nb"}}"#).status
                    == 400
            )
            #expect(post("/v1/tasks", #"{"url":"\#(url)","destination":"\#(destination)","priority":7}"#).status == 400)
            #expect(post("/v1/tasks", String(repeating: " ", count: 100_000)).status == 413)
            #expect(post("/v1/tasks/999/pause", "{}").status == 404)
            #expect(post("/v1/tasks/abc/pause", "{}").status == 400)
            #expect(post("/v1/nothing", "{}").status == 404)
            #expect(post("/v1/health", "{}").status == 405)
            #expect(post("/v1/events/ack", #"{"session":"cli"}"#).status == 400)

            // Fuzz: random bytes, and valid requests cut at random points.
            var generator = SystemRandomNumberGenerator()
            let valid = Array(
                "POST /v1/tasks HTTP/1.1\r\nHost: d\r\nContent-Length: 60\r\n\r\n{\"url\":\"\(url)\",\"destination\":\"\(destination)\"}"
                    .utf8
            )
            for round in 0..<300 {
                let bytes: [UInt8] =
                    round.isMultiple(of: 2)
                    ? (0..<Int.random(in: 1...512, using: &generator)).map { _ in
                        UInt8.random(in: 0...255, using: &generator)
                    }
                    : Array(valid.prefix(Int.random(in: 1..<valid.count, using: &generator)))
                UnixSocket.send(socket, bytes)
            }
            #expect(DaemonProcess.isAlive(pid))
            #expect(try await daemon.client.health())
            let task = try await daemon.client.add(.init(url: url, destination: destination))
            #expect(try await finalState(of: try #require(task.id), daemon.client).state == .completed)
        }
    }

    /// The daemon's log (standard error, info by default) tells a task's story across a
    /// `kill -9`: its start, and after the restart that it was queued again, the checkpoint
    /// it continues from, the byte the server's 206 continued at, and its end.
    @Test func theLogTellsStartResumeAndEndAcrossAKill() async throws {
        try await withServer { server in
            let daemon = try DaemonProcess()
            var pid = try await daemon.start(log: "first")
            let output = daemon.directory.appendingPathComponent("logged.bin")
            let url = server.url("/bytes/3000000?drip=65536&interval=50").absoluteString
            let id = try await daemon.add([url, "-o", output.path])
            let key = BackgroundTaskRecord.resumeKey(for: id)
            var checkpoint: Int64 = 0
            for _ in 0..<1000 where checkpoint == 0 {
                checkpoint = try BackgroundStore(directory: daemon.state).resumeData(for: key)?.bytesOnDisk ?? 0
                if checkpoint == 0 { try await Task.sleep(for: .milliseconds(20)) }
            }
            try #require(checkpoint > 0, "no checkpoint was stored")
            DaemonProcess.killNine(pid)
            let stored = try BackgroundStore(directory: daemon.state).resumeData(for: key)?.bytesOnDisk ?? 0
            pid = try await daemon.start(log: "second")
            defer { DaemonProcess.killNine(pid) }
            #expect(try await finalState(of: id, daemon.client).state == .completed)
            #expect(try Data(contentsOf: output) == TestContent.data(size: 3_000_000))
            let first = try String(contentsOf: daemon.directory.appendingPathComponent("first.err"), encoding: .utf8)
            var second = ""
            for _ in 0..<500 where !second.contains("task \(id) completed") {
                second = try String(contentsOf: daemon.directory.appendingPathComponent("second.err"), encoding: .utf8)
                if !second.contains("task \(id) completed") { try await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(first.contains("task \(id) started: \(url)"), "\(first)")
            #expect(second.contains("task \(id) was running when the last run stopped: queued again"), "\(second)")
            #expect(
                second.contains("task \(id) started: \(url) → \(output.path) (a checkpoint holds \(stored) bytes)"),
                "\(second)"
            )
            #expect(second.contains("task \(id) resumed at byte \(stored) of 3000000"), "\(second)")
            #expect(second.contains("task \(id) completed: "), "\(second)")
        }
    }

    @Test func sigtermStopsTheDaemonPromptlyAndCleanly() async throws {
        let daemon = try DaemonProcess()
        let pid = try await daemon.start()
        // This process keeps a connection to it open (the client's pool).
        #expect(try await daemon.client.health())
        kill(pid, SIGTERM)
        // Exited within 5 s, normally, status 0 (not a trap, not a signal).
        #expect(try await DaemonProcess.exitStatus(of: pid, within: 5) == 0)
    }

    @Test func onlyItsUserCanReachTheSocket() async throws {
        let daemon = try DaemonProcess()
        let pid = try await daemon.start()
        defer { DaemonProcess.killNine(pid) }
        var info = stat()
        #expect(stat(daemon.socket.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(stat(daemon.state.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        // Another user (nobody) cannot connect, even with the path.
        if geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/sbin/runuser"),
            let curl = ["/usr/bin/curl", "/bin/curl"].first(where: FileManager.default.isExecutableFile(atPath:))
        {
            let other = try await ProcessRunner.run(
                "/usr/sbin/runuser",
                [
                    "-u", "nobody", "--", curl, "-s", "--unix-socket", daemon.socket.path,
                    "http://d/v1/health",
                ]
            )
            #expect(other.status == 7, "curl as nobody: \(other.status) \(other.stderrText)")
            let same = try await ProcessRunner.run(
                curl,
                ["-s", "--unix-socket", daemon.socket.path, "http://d/v1/health"]
            )
            #expect(same.status == 0)
        }
    }
}

/// Raw bytes over a Unix socket, for requests no HTTP client would send.
enum UnixSocket {
    private static func connect(_ path: String) -> Int32? {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return descriptor
    }

    /// Sends `bytes` and closes without reading.
    static func send(_ path: String, _ bytes: [UInt8]) {
        guard let descriptor = connect(path) else { return }
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
    }

    /// Sends `bytes` and reads until the server closes (or 5 s pass).
    static func exchange(_ path: String, _ bytes: [UInt8]) -> Data {
        guard let descriptor = connect(path) else { return Data() }
        defer { close(descriptor) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written <= 0 { break }
            offset += written
        }
        var reply = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count <= 0 { break }
            reply.append(contentsOf: buffer[0..<count])
        }
        return reply
    }
}
