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
            // One request and one transaction per batch (all or none), the ids in order.
            for batch in Self.batches(of: requests) {
                let ids = try await daemon.client.add(Array(batch))
                print(ids.map(String.init).joined(separator: "\n"))
            }
        } catch let error as ValidationError {
            FileHandle.standardError.write(Data("ferry: \(error.message)\n".utf8))
            Foundation.exit(64)
        } catch {
            ExitStatus.exit(with: error)
        }
    }
}

extension AddCommand {
    /// The tasks `ferry add -i` sends a request: the daemon's work and memory for one stay
    /// small (a batch of 10,000 raised its peak by about 20 MiB), and the requests' count
    /// stays small beside the work of the tasks.
    static let batchSize = 1000

    /// `requests` cut into batches the daemon takes in one request: at most ``batchSize``
    /// tasks, and half its largest body (JSON escapes can double a field).
    static func batches(of requests: [BackgroundAPI.AddTask]) -> [ArraySlice<BackgroundAPI.AddTask>] {
        var batches: [ArraySlice<BackgroundAPI.AddTask>] = []
        var start = 0
        var bytes = 0
        for (index, request) in requests.enumerated() {
            let size =
                256 + request.url.utf8.count + request.destination.utf8.count
                + (request.headers ?? [:]).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count + 8 }
                + (request.mirrors ?? []).reduce(0) { $0 + $1.utf8.count + 4 } + (request.checksum?.utf8.count ?? 0)
            if index > start,
                index - start == batchSize
                    || bytes + 2 * size > BackgroundAPI.AddTasks.maximumBodySize / 2
            {
                batches.append(requests[start..<index])
                start = index
                bytes = 0
            }
            bytes += 2 * size
        }
        if start < requests.count { batches.append(requests[start...]) }
        return batches
    }
}

/// `ferry ls`: the daemon's tasks.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the daemon's tasks: state, bytes, total, rate.",
        discussion: """
            Running tasks first, then queued, paused, failed, completed and canceled, each by id: \
            a page of --limit, then the totals of every state. The next page: --after with \
            the STATE:ID the last line names.
            """
    )

    @Flag(name: .customLong("json"), help: "One JSON array of tasks.")
    var json = false

    @Option(name: .customLong("session"), help: "Only this background session's tasks ('cli' for ferry add).")
    var session: String?

    @Option(
        name: .customLong("state"),
        help: "Only tasks in these states, in this order (comma-separated, repeatable; 'all': every state)."
    )
    var states: [String] = []

    @Option(name: .customLong("limit"), help: "At most this many tasks (default 100; 0: every one, page by page).")
    var limit = 100

    @Option(
        name: .customLong("after"),
        help: "Go on after this task: STATE:ID (as the last page's last line says), or ID (greater ids in each state)."
    )
    var after: String?

    @Flag(
        name: .customLong("all"),
        help: "Also tasks that finished more than a day ago (the daemon keeps them --keep-days)."
    )
    var all = false

    @OptionGroup var daemon: DaemonOptions

    /// Finished tasks older than this are listed only with --all.
    static let recent: TimeInterval = 86_400

    /// The order a person wants: what moves, then what waits, then what ended.
    static let order: [BackgroundTaskRecord.State] = [.running, .queued, .paused, .failed, .completed, .canceled]

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit is 0 (every task) or more.") }
        if let after, BackgroundStore.Cursor(after) == nil {
            throw ValidationError("--after is STATE:ID or ID, not '\(after)'.")
        }
        _ = try listedStates()
    }

    /// The states --state names, in order; `nil`: the default order.
    func listedStates() throws -> [BackgroundTaskRecord.State]? {
        let names = states.flatMap { $0.split(separator: ",").map(String.init) }
        guard !names.isEmpty, !names.contains("all") else { return names.isEmpty ? nil : Self.order }
        do {
            return try BackgroundTaskRecord.State.list(names)
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        do {
            let client = try await daemon.answeringClient()
            let states = try listedStates() ?? Self.order
            let since = all ? nil : Date().addingTimeInterval(-Self.recent)
            let fetch = { [session, limit, after] () async throws -> BackgroundAPI.TaskList in
                try await Self.list(client, session: session, states: states, after: after, limit: limit, since: since)
            }
            var list = try await fetch()
            // The rate: a second look a quarter of a second later, when anything runs.
            var rates: [Int64: Double] = [:]
            if list.tasks.contains(where: { $0.state == .running }) {
                let first = Date()
                try await Task.sleep(for: .milliseconds(250))
                let later = try await fetch()
                let elapsed = Date().timeIntervalSince(first)
                let before = Dictionary(list.tasks.compactMap { task in task.id.map { ($0, task) } }) { one, _ in one }
                for task in later.tasks {
                    guard let id = task.id, let earlier = before[id] else { continue }
                    rates[id] = Double(task.bytesReceived - earlier.bytesReceived) / elapsed
                }
                list = later
            }
            if json {
                let rows = list.tasks.map { ListRow(task: $0.withURLsRedacted, rate: $0.id.flatMap { rates[$0] }) }
                print(String(decoding: try BackgroundAPI.encoder.encode(rows), as: UTF8.self))
                return
            }
            print(Self.table(list.tasks, rates: rates), terminator: "")
            print(Self.footer(list, states: states, limit: limit))
        } catch {
            ExitStatus.exit(with: error)
        }
    }

    /// A page of `limit` tasks, or with a `limit` of 0 every task, page by page.
    static func list(
        _ client: BackgroundClient,
        session: String?,
        states: [BackgroundTaskRecord.State],
        after: String?,
        limit: Int,
        since: Date?
    ) async throws -> BackgroundAPI.TaskList {
        guard limit == 0 else {
            return try await client.page(
                session: session,
                states: states,
                after: after,
                limit: limit,
                finishedSince: since
            )
        }
        let size = 10_000
        var whole = BackgroundAPI.TaskList(tasks: [])
        var cursor = after
        while true {
            let page = try await client.page(
                session: session,
                states: states,
                after: cursor,
                limit: size,
                finishedSince: since
            )
            whole.tasks += page.tasks
            whole.totals = page.totals
            guard page.tasks.count == size, let last = page.tasks.last, let id = last.id else { return whole }
            cursor = BackgroundStore.Cursor(state: last.state, id: id).text
        }
    }

    /// One line a task, under a heading.
    static func table(_ tasks: [BackgroundTaskRecord], rates: [Int64: Double]) -> String {
        var text = "ID    STATE      BYTES         TOTAL         RATE/s       URL → FILE\n"
        for task in tasks.map(\.withURLsRedacted) {
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
            text += line.joined(separator: " ") + "\n"
        }
        return text
    }

    /// The totals of every state, and how to ask for the next page when this one is full.
    static func footer(_ list: BackgroundAPI.TaskList, states: [BackgroundTaskRecord.State], limit: Int) -> String {
        let totals = list.totals ?? [:]
        let counted = order.compactMap { state in totals[state.rawValue].map { "\($0) \(state.rawValue)" } }
        var footer = counted.isEmpty ? "no tasks" : counted.joined(separator: ", ")
        if limit > 0, list.tasks.count == limit, let last = list.tasks.last, let id = last.id {
            footer += "; more after this page: --after \(BackgroundStore.Cursor(state: last.state, id: id).text)"
        }
        return footer
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
                    Data(
                        "ferry: task \(id) failed: \(Redaction.redactingURLs(in: task.errorMessage ?? "unknown"))\n"
                            .utf8
                    )
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
