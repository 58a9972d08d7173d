import ArgumentParser
import Ferry
import FerryBackground
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `ferry add URL`: hands a download to the daemon and returns.
struct AddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add a download (or, with --upload, an upload) to the daemon; prints its id and returns at once.",
        discussion: """
            Starts the daemon when none answers (unless --no-start). Follow it with `ferry wait ID`.
            An upload to a server that offers resumable uploads continues from the server's
            offset after a pause, a failure or the daemon's kill -9; its response body goes to
            -o (default FILE.response).
            """
    )

    @Argument(help: "The http or https URL to download from (or upload to).")
    var url: String?

    @Option(
        name: [.customShort("i"), .customLong("input-file")],
        help: ArgumentHelp(
            "Add every download FILE lists, in aria2c's format (as ferry get -i): mirrors separated by TABs, out=, dir=, checksum=, header=, split=; prints one id a line.",
            valueName: "file"
        )
    )
    var inputFile: String?

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: "Where the finished file (an upload: the response body) goes (default: the URL's file name here)."
    )
    var output: String?

    @Option(name: .customLong("upload"), help: "Upload FILE to the URL instead of downloading.")
    var upload: String?

    @Option(
        name: [.customShort("X"), .customLong("request")],
        help: "An upload's method: POST (the default), PUT or PATCH."
    )
    var method: String?

    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: "An extra header field, 'Name: value' (repeatable)."
    )
    var headers: [String] = []

    @Option(name: .customLong("priority"), help: "0 (lowest) to 1 (highest); 0.5 by default.")
    var priority: Double?

    @Option(name: .customLong("start-after"), help: "Do not start before this many seconds from now.")
    var startAfter: Double?

    @Flag(name: .customLong("discretionary"), help: "Run only when nothing else waits.")
    var discretionary = false

    @Option(
        name: [.customShort("s"), .customLong("split")],
        help:
            "Download over up to N connections, in segments (as ferry get -s); the daemon's --max-per-host still applies."
    )
    var split: Int?

    @Flag(name: .customLong("no-start"), help: "Fail instead of starting a daemon when none answers.")
    var noStart = false

    @OptionGroup var daemon: DaemonOptions

    func validate() throws {
        guard (url == nil) != (inputFile == nil) else { throw ValidationError("Give a URL or -i FILE, not both.") }
        if inputFile != nil, output != nil || upload != nil {
            throw ValidationError(
                "-o and --upload go with one URL; an input file names its outputs with out= and dir=."
            )
        }
    }

    func run() async throws {
        if let inputFile {
            await addAll(from: inputFile)
            return
        }
        let url = url ?? ""
        do {
            guard let target = URL(string: url), target.host != nil else {
                throw FerryError(.invalidURL, "'\(url)' is not an http or https URL.")
            }
            let here = URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
            let name = target.lastPathComponent
            let source = upload.map { URL(fileURLWithPath: $0, relativeTo: here).standardizedFileURL }
            let file =
                output ?? source.map { $0.path + ".response" }
                ?? (name.isEmpty || name == "/" || name == ".." ? "index.html" : name)
            let destination = URL(fileURLWithPath: file, relativeTo: here).standardizedFileURL.path
            var request = BackgroundAPI.AddTask(url: url, destination: destination)
            if let source {
                request.kind = .upload
                request.sourceFile = source.path
                request.method = method
            } else if method != nil {
                throw ValidationError("-X is for uploads (--upload FILE).")
            }
            try complete(&request, headers: headers)
            request.connections = split
            try await BackgroundDaemonLauncher.ensureRunning(daemon.locations, start: !noStart && daemon.mayStartDaemon)
            let task = try await daemon.client.add(request)
            print(task.id ?? 0)
        } catch let error as ValidationError {
            throw error
        } catch {
            ExitStatus.exit(with: error)
        }
    }
}

extension AddCommand {
    /// The header fields, priority and schedule every added task takes from the options.
    private func complete(_ request: inout BackgroundAPI.AddTask, headers: [String]) throws {
        var fields: [String: String] = [:]
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw ValidationError("'\(header)' is not 'Name: value'.")
            }
            fields[String(header[..<colon])] = header[header.index(after: colon)...].trimmingCharacters(
                in: .whitespaces
            )
        }
        request.headers = fields.isEmpty ? nil : fields
        request.priority = priority
        request.earliestBeginDate = startAfter.map { Date(timeIntervalSinceNow: $0) }
        request.discretionary = discretionary ? true : nil
    }

    /// `-i FILE`: a task for each download the file lists, its mirrors and checksum given to
    /// the daemon; prints their ids, one a line. Nothing is added when the file cannot be
    /// read or parsed.
    private func addAll(from path: String) async {
        do {
            let data =
                path == "-"
                ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: path)
            guard let data else { throw FerryError(.fileSystem, "Cannot read the input file '\(path)'.") }
            let jobs = try InputFile.jobs(in: String(decoding: data, as: UTF8.self))
            let here = FileManager.default.currentDirectoryPath
            var requests: [BackgroundAPI.AddTask] = []
            for job in jobs {
                guard let first = job.urls.first, let target = URL(string: first), target.host != nil else {
                    throw FerryError(.invalidURL, "'\(job.urls.first ?? "")' is not an http or https URL.")
                }
                let folder = URL(
                    fileURLWithPath: job.directory ?? here,
                    isDirectory: true,
                    relativeTo: URL(fileURLWithPath: here)
                )
                let name =
                    job.output
                    ?? (target.lastPathComponent.isEmpty || target.lastPathComponent == "/"
                        ? "index.html" : target.lastPathComponent)
                var request = BackgroundAPI.AddTask(
                    url: first,
                    destination: folder.appendingPathComponent(name).standardizedFileURL.path
                )
                try complete(&request, headers: headers + job.headers)
                request.connections = job.split ?? split
                request.mirrors = job.urls.count > 1 ? Array(job.urls.dropFirst()) : nil
                request.checksum = job.checksum
                requests.append(request)
            }
            try await BackgroundDaemonLauncher.ensureRunning(daemon.locations, start: !noStart && daemon.mayStartDaemon)
            for request in requests { print(try await daemon.client.add(request).id ?? 0) }
        } catch let error as ValidationError {
            FileHandle.standardError.write(Data("ferry: \(error.message)\n".utf8))
            Foundation.exit(64)
        } catch {
            ExitStatus.exit(with: error)
        }
    }
}

/// `ferry ls`: the daemon's tasks.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the daemon's tasks: state, bytes, total, rate."
    )

    @Flag(name: .customLong("json"), help: "One JSON array of tasks.")
    var json = false

    @Option(name: .customLong("session"), help: "Only this background session's tasks ('cli' for ferry add).")
    var session: String?

    @Flag(
        name: .customLong("all"),
        help: "Also tasks that finished more than a day ago (the daemon keeps them --keep-days)."
    )
    var all = false

    @OptionGroup var daemon: DaemonOptions

    /// Finished tasks older than this are listed only with --all.
    static let recent: TimeInterval = 86_400

    func run() async throws {
        do {
            let client = try await daemon.answeringClient()
            let shown: ([BackgroundTaskRecord]) -> [BackgroundTaskRecord] = { [all] tasks in
                let since = Date().addingTimeInterval(-Self.recent)
                return all ? tasks : tasks.filter { !$0.state.isFinal || ($0.finishedAt ?? Date()) >= since }
            }
            var tasks = shown(try await client.tasks(session: session))
            // The rate: a second look a quarter of a second later, when anything runs.
            var rates: [Int64: Double] = [:]
            if tasks.contains(where: { $0.state == .running }) {
                let first = Date()
                try await Task.sleep(for: .milliseconds(250))
                let later = shown(try await client.tasks(session: session))
                let elapsed = Date().timeIntervalSince(first)
                for task in later {
                    guard let id = task.id, let before = tasks.first(where: { $0.id == id }) else { continue }
                    rates[id] = Double(task.bytesReceived - before.bytesReceived) / elapsed
                }
                tasks = later
            }
            if json {
                let rows = tasks.map { ListRow(task: $0, rate: $0.id.flatMap { rates[$0] }) }
                print(String(decoding: try BackgroundAPI.encoder.encode(rows), as: UTF8.self))
                return
            }
            print("ID    STATE      BYTES         TOTAL         RATE/s       URL → FILE")
            for task in tasks {
                let rate =
                    task.id.flatMap { rates[$0] }.map {
                        ByteCountFormatter.string(fromByteCount: Int64($0), countStyle: .binary)
                    } ?? "-"
                let line = [
                    String(task.id ?? 0).padding(toLength: 5, withPad: " ", startingAt: 0),
                    task.state.rawValue.padding(toLength: 10, withPad: " ", startingAt: 0),
                    String(task.bytesReceived).padding(toLength: 13, withPad: " ", startingAt: 0),
                    (task.bytesExpected.map(String.init) ?? "?").padding(toLength: 13, withPad: " ", startingAt: 0),
                    rate.padding(toLength: 12, withPad: " ", startingAt: 0),
                    "\(task.url) → \(task.destination)" + (task.errorMessage.map { " (\($0))" } ?? ""),
                ]
                print(line.joined(separator: " "))
            }
        } catch {
            ExitStatus.exit(with: error)
        }
    }

    /// A task as `ls --json` prints it: the record and its rate.
    struct ListRow: Encodable {
        var task: BackgroundTaskRecord
        var rate: Double?

        func encode(to encoder: any Encoder) throws {
            try task.encode(to: encoder)
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(rate, forKey: .rate)
        }

        enum Key: String, CodingKey { case rate }
    }
}

/// `ferry clean`: forgets finished tasks.
struct CleanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clean",
        abstract: "Forget the daemon's finished tasks (completed, failed, canceled) now.",
        discussion:
            "Their files stay where they are. The daemon also forgets them by itself (--keep-days, --keep-finished)."
    )

    @Option(name: .customLong("session"), help: "Only this background session's tasks ('cli' for ferry add).")
    var session: String?

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        do {
            let removed = try await daemon.answeringClient().clean(session: session)
            print("\(removed) finished task\(removed == 1 ? "" : "s") removed")
        } catch {
            ExitStatus.exit(with: error)
        }
    }
}

/// `ferry pause|resume|cancel ID`.
struct TaskActionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "task", shouldDisplay: false)

    @Argument(help: "The task's id (from ferry add or ferry ls).")
    var id: Int64

    @OptionGroup var daemon: DaemonOptions

    func perform(_ action: String) async {
        do {
            let task = try await daemon.answeringClient().perform(action, on: id)
            print("\(id) \(task.state.rawValue)")
        } catch {
            ExitStatus.exit(with: error)
        }
    }
}

struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Pause a task, keeping what it fetched."
    )
    @OptionGroup var task: TaskActionCommand
    func run() async throws { await task.perform("pause") }
}

struct ResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "Resume a paused or failed task from its checkpoint."
    )
    @OptionGroup var task: TaskActionCommand
    func run() async throws { await task.perform("resume") }
}

struct CancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a task and discard what it fetched."
    )
    @OptionGroup var task: TaskActionCommand
    func run() async throws { await task.perform("cancel") }
}

/// `ferry wait ID`: blocks until the task ends.
struct WaitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait for a task to end, showing its progress; exit 0 when it completed, non-zero otherwise."
    )

    @Argument(help: "The task's id.")
    var id: Int64

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "No progress line.")
    var quiet = false

    @OptionGroup var daemon: DaemonOptions

    func run() async throws {
        var progress = ProgressLine()
        let show = !quiet && isatty(STDERR_FILENO) == 1
        var client: BackgroundClient
        do {
            client = try await daemon.answeringClient()
        } catch {
            ExitStatus.exit(with: error)
        }
        var lostDaemon = 0
        while true {
            let task: BackgroundTaskRecord
            do {
                task = try await client.task(id)
                lostDaemon = 0
            } catch let error as FerryError
                where (error.reason == .network || error.reason == .fileSystem) && lostDaemon < 5
            {
                // The daemon went away mid-wait (restarted, killed): wait for it, or start
                // it, and go on; the task continues from its checkpoint there.
                lostDaemon += 1
                do {
                    client = try await daemon.answeringClient()
                } catch {
                    ExitStatus.exit(with: error)
                }
                continue
            } catch {
                ExitStatus.exit(with: error)
            }
            if show {
                progress.update(bytes: task.bytesReceived, total: task.bytesExpected, finished: task.state.isFinal)
            }
            switch task.state {
            case .completed:
                if show { progress.finish() }
                return
            case .failed:
                if show { progress.finish() }
                FileHandle.standardError.write(
                    Data("ferry: task \(id) failed: \(task.errorMessage ?? "unknown")\n".utf8)
                )
                throw ExitCode(1)
            case .canceled:
                if show { progress.finish() }
                FileHandle.standardError.write(Data("ferry: task \(id) was cancelled\n".utf8))
                throw ExitCode(ExitStatus.interrupted)
            case .queued, .running, .paused:
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }
}
