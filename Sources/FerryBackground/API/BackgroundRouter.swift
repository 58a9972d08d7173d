import Ferry
import Foundation

/// Answers the socket API's requests with the daemon: routing, validation, JSON. No I/O of
/// its own; the server hands it whole requests (bounded) and writes what it returns.
struct BackgroundRouter: Sendable {
    let daemon: BackgroundDaemon
    /// Directories a finished file may be written under.
    let allowedDirectories: [URL]
    /// ``allowedDirectories`` with links resolved, once.
    private let resolvedDirectories: [String]

    /// Whether a task's URLs are shown with their passwords and signatures `REDACTED`
    /// (``BackgroundTaskRecord/withURLsRedacted``), as to people on the web page; the socket
    /// gives them as stored to its own user (a background session reattaching its tasks
    /// needs them). Credential headers are never shown either way.
    let redactsURLs: Bool

    init(daemon: BackgroundDaemon, allowedDirectories: [URL], redactsURLs: Bool = false) {
        self.daemon = daemon
        self.allowedDirectories = allowedDirectories
        self.redactsURLs = redactsURLs
        resolvedDirectories = PathConfinement.resolved(allowedDirectories)
    }

    /// `task` as this router shows it.
    private func shown(_ task: BackgroundTaskRecord) -> BackgroundTaskRecord {
        redactsURLs ? task.withURLsRedacted : task.redacted
    }

    struct Response: Sendable {
        var status: Int
        var body: Data
        /// Header fields beyond Content-Length (and Content-Type: application/json, unless
        /// given here).
        var headers: [(name: String, value: String)] = []
    }

    func respond(method: String, target: String, body: Data) async -> Response {
        do {
            return try await route(method: method, target: target, body: body)
        } catch let failure as BackgroundAPI.Failure {
            return Self.failure(failure)
        } catch {
            return Self.failure(BackgroundAPI.Failure(500, "internal", "The daemon's store failed: \(error)."))
        }
    }

    static func failure(_ failure: BackgroundAPI.Failure) -> Response {
        Response(status: failure.status, body: json(["error": failure]))
    }

    private static func json(_ value: some Encodable) -> Data {
        (try? BackgroundAPI.encoder.encode(value)) ?? Data("{}".utf8)
    }

    private func route(method: String, target: String, body: Data) async throws -> Response {
        let components = URLComponents(string: target)
        let path = (components?.path ?? "").split(separator: "/").map(String.init)
        let query = Dictionary(
            (components?.queryItems ?? []).map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { _, last in last }
        )
        guard let endpoint = Endpoint(path) else {
            throw BackgroundAPI.Failure.notFound("No such endpoint: \(target).")
        }
        switch (method, endpoint) {
        case ("GET", .health):
            return Response(status: 200, body: Self.json(["pid": Int(ProcessInfo.processInfo.processIdentifier)]))
        case ("POST", .tasks):
            let request = try BackgroundAPI.decode(
                BackgroundAPI.AddTask.self,
                from: body,
                fields: BackgroundAPI.AddTask.fields
            )
            let record = try validate(request)
            return Response(status: 201, body: Self.json(shown(try await daemon.add(record))))
        case ("POST", .batch):
            let batch = try BackgroundAPI.decodeBatch(body)
            var records: [BackgroundTaskRecord] = []
            for (index, request) in batch.tasks.enumerated() {
                do {
                    records.append(try validate(request))
                } catch {
                    throw BackgroundAPI.Failure(error.status, error.code, "tasks[\(index)]: \(error.message)")
                }
            }
            let ids = try await daemon.add(records)
            return Response(status: 201, body: Self.json(BackgroundAPI.AddedTasks(ids: ids)))
        case ("GET", .tasks):
            let session = try query["session"].map(Self.validSession)
            guard let page = try Self.pageQuery(query, session: session) else {
                // No page asked for: every task (of the session), as before pages.
                let tasks = try daemon.store.tasks(session: session)
                return Response(status: 200, body: Self.json(BackgroundAPI.TaskList(tasks: await live(tasks))))
            }
            let (tasks, totals) = try daemon.store.page(page)
            let shown = await daemon.reported(totals, session: session)
            let list = BackgroundAPI.TaskList(
                tasks: await live(tasks),
                totals: Dictionary(uniqueKeysWithValues: shown.map { ($0.key.rawValue, $0.value) })
            )
            return Response(status: 200, body: Self.json(list))
        case ("GET", .task(let id)):
            let task = try await found(try Self.taskID(id)) { try $0.store.task($1) }
            return Response(status: 200, body: Self.json(await live([task])[0]))
        case ("POST", .action(let id, let action)):
            let id = try Self.taskID(id)
            let task: BackgroundTaskRecord
            switch action {
            case "pause": task = try await found(id) { try await $0.pause($1) }
            case "resume": task = try await found(id) { try await $0.resume($1) }
            case "cancel": task = try await found(id) { try await $0.cancel($1) }
            default: throw BackgroundAPI.Failure.notFound("No action '\(action)' (pause, resume, cancel).")
            }
            return Response(status: 200, body: Self.json(shown(task)))
        case ("GET", .sessions):
            return Response(
                status: 200,
                body: Self.json(BackgroundAPI.SessionList(sessions: try await attachedNow(daemon.store.sessions())))
            )
        case ("POST", .clean):
            let session = try query["session"].map(Self.validSession)
            let removed = try await daemon.clean(session: session)
            return Response(status: 200, body: Self.json(["removed": removed]))
        case ("GET", .events):
            let session = try Self.validSession(query["session"] ?? "")
            guard let after = Int64(query["after"] ?? "0"), after >= 0 else {
                throw BackgroundAPI.Failure.badRequest("'after' is not a sequence number.")
            }
            // A long poll: with `wait` (milliseconds, at most 30 s) and no event yet, the
            // answer waits for the next one.
            let wait = min(max(Int(query["wait"] ?? "0") ?? 0, 0), 30_000)
            await daemon.attach(session)
            let bell = daemon.store.events
            let generation = bell.generation
            var events = try daemon.store.events(session: session, after: after)
            if events.isEmpty, wait > 0 {
                await bell.wait(past: generation, timeout: .milliseconds(wait))
                events = try daemon.store.events(session: session, after: after)
            }
            return Response(status: 200, body: Self.json(BackgroundAPI.EventList(events: events)))
        case ("POST", .acknowledge):
            let ack = try BackgroundAPI.decode(
                BackgroundAPI.Acknowledge.self,
                from: body,
                fields: BackgroundAPI.Acknowledge.fields
            )
            try daemon.store.acknowledge(session: try Self.validSession(ack.session), through: ack.through)
            return Response(status: 204, body: Data())
        default:
            throw BackgroundAPI.Failure(405, "methodNotAllowed", "\(method) is not allowed on \(target).")
        }
    }

    /// The API's resources, from a request path.
    private enum Endpoint {
        case health
        case sessions
        case tasks
        case batch
        case task(String)
        case action(String, String)
        case events
        case acknowledge
        case clean

        init?(_ path: [String]) {
            guard path.first == "v1" else { return nil }
            let rest = Array(path.dropFirst())
            switch rest.count {
            case 1 where rest[0] == "health": self = .health
            case 1 where rest[0] == "tasks": self = .tasks
            case 1 where rest[0] == "sessions": self = .sessions
            case 2 where rest[0] == "tasks" && rest[1] == "batch": self = .batch
            case 2 where rest[0] == "tasks": self = .task(rest[1])
            case 3 where rest[0] == "tasks": self = .action(rest[1], rest[2])
            case 1 where rest[0] == "events": self = .events
            case 1 where rest[0] == "clean": self = .clean
            case 2 where rest[0] == "events" && rest[1] == "ack": self = .acknowledge
            default: return nil
            }
        }
    }

    private func found(
        _ id: Int64,
        _ body: @Sendable (BackgroundDaemon, Int64) async throws -> BackgroundTaskRecord?
    ) async throws -> BackgroundTaskRecord {
        guard let task = try await body(daemon, id) else { throw BackgroundAPI.Failure.notFound("No task \(id).") }
        return task
    }

    /// Running tasks with the bytes they have now rather than at their last checkpoint.
    /// `sessions` with the attachment times this run knows and the store not yet.
    private func attachedNow(_ sessions: [BackgroundAPI.SessionInfo]) async -> [BackgroundAPI.SessionInfo] {
        let known = await daemon.attachments
        return sessions.map { session in
            var session = session
            if let date = known[session.identifier], session.lastAttachedAt.map({ $0 < date }) ?? true {
                session.lastAttachedAt = date
            }
            return session
        }
    }

    /// `tasks` as a client sees them: with live progress, and with credentials redacted.
    private func live(_ tasks: [BackgroundTaskRecord]) async -> [BackgroundTaskRecord] {
        var result: [BackgroundTaskRecord] = []
        for task in tasks { result.append(await daemon.reported(shown(task))) }
        for index in result.indices where result[index].state == .running {
            if let id = result[index].id, let progress = await daemon.liveProgress(id) {
                result[index].bytesReceived = max(result[index].bytesReceived, progress.received)
                result[index].bytesExpected = progress.expected ?? result[index].bytesExpected
            }
        }
        return result
    }

    // MARK: Pages

    /// The most tasks a page may hold.
    static let maximumPage = 10_000

    /// The page `query` asks for (`state`, `limit`, `after`, `finishedSince`), or `nil` when
    /// it names none of them.
    static func pageQuery(
        _ query: [String: String],
        session: String?
    ) throws(BackgroundAPI.Failure) -> BackgroundStore.PageQuery? {
        guard ["state", "limit", "after", "finishedSince"].contains(where: { query[$0] != nil }) else { return nil }
        var states = BackgroundTaskRecord.State.allCases
        if let text = query["state"], text != "all" {
            do {
                states = try BackgroundTaskRecord.State.list(text.split(separator: ","))
            } catch {
                throw .badRequest(error.message)
            }
            guard !states.isEmpty else { throw .badRequest("'state' names no state.") }
        }
        var page = BackgroundStore.PageQuery(states: states, session: session, limit: maximumPage)
        if let text = query["limit"] {
            guard let limit = Int(text), (1...maximumPage).contains(limit) else {
                throw .badRequest("'limit' is 1 to \(maximumPage).")
            }
            page.limit = limit
        }
        if let text = query["after"] {
            guard let cursor = BackgroundStore.Cursor(text) else {
                throw .badRequest("'after' is a task id, or STATE:ID (the last task of the previous page).")
            }
            page.after = cursor
        }
        if let text = query["finishedSince"] {
            guard let date = BackgroundAPI.date(text) else {
                throw .badRequest("'finishedSince' is an RFC 3339 date.")
            }
            page.finishedSince = date
        }
        return page
    }

    // MARK: Validation

    private func validate(_ request: BackgroundAPI.AddTask) throws(BackgroundAPI.Failure) -> BackgroundTaskRecord {
        guard let url = URL(string: request.url), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https", url.host?.isEmpty == false
        else {
            throw .badRequest("'\(request.url)' is not an http or https URL with a host.")
        }
        for (name, value) in request.headers ?? [:] {
            let token = !name.isEmpty && name.unicodeScalars.allSatisfy { $0.isASCII && $0.value > 32 && $0 != ":" }
            // Scalars, not Characters: "\r\n" is one Character, equal to neither.
            guard token, !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw .badRequest("The header field '\(name)' is not valid.")
            }
        }
        if let priority = request.priority, !(0...1).contains(priority) {
            throw .badRequest("'priority' must be between 0 and 1.")
        }
        if let connections = request.connections, !(1...64).contains(connections) {
            throw .badRequest("'connections' must be between 1 and 64.")
        }
        if let description = request.taskDescription, description.utf8.count > 4096 {
            throw .badRequest("'taskDescription' may hold at most 4096 bytes.")
        }
        var record = BackgroundTaskRecord(
            session: try Self.validSession(request.session ?? "cli"),
            url: url.absoluteString,
            headers: request.headers ?? [:],
            destination: try allowedDestination(request.destination).path,
            priority: request.priority ?? 0.5,
            earliestBeginDate: request.earliestBeginDate,
            isDiscretionary: request.discretionary ?? false
        )
        record.taskDescription = request.taskDescription
        record.connections = request.connections
        for mirror in request.mirrors ?? [] {
            guard let url = URL(string: mirror), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
                url.host?.isEmpty == false
            else {
                throw .badRequest("The mirror '\(mirror)' is not an http or https URL with a host.")
            }
        }
        record.mirrors = request.mirrors.flatMap { $0.isEmpty ? nil : $0 }
        if let checksum = request.checksum {
            guard (try? Checksum(parsing: checksum)) != nil else {
                throw .badRequest("'checksum' is ALGORITHM=HEX (sha256, sha384, sha512, sha1, md5), not '\(checksum)'.")
            }
            record.checksum = checksum
        }
        if request.kind == .upload {
            let method = (request.method ?? "POST").uppercased()
            guard ["POST", "PUT", "PATCH"].contains(method) else {
                throw .badRequest("An upload's method is POST, PUT or PATCH.")
            }
            guard let source = request.sourceFile else { throw .badRequest("An upload needs 'sourceFile'.") }
            let file = try allowedPath(source, role: "sourceFile")
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                FileManager.default.isReadableFile(atPath: file.path)
            else {
                throw .badRequest("'\(source)' is not a readable file.")
            }
            record.kind = .upload
            record.method = method
            record.sourceFile = file.path
        } else if request.method != nil || request.sourceFile != nil {
            throw .badRequest("'method' and 'sourceFile' are for uploads (\"kind\": \"upload\").")
        }
        if record.kind == .upload, record.mirrors != nil || record.checksum != nil {
            throw .badRequest("'mirrors' and 'checksum' are for downloads.")
        }
        return record
    }

    /// `path` when it is absolute, names a file, and lies under an allowed directory
    /// (symbolic links of its directory resolved).
    func allowedDestination(_ path: String) throws(BackgroundAPI.Failure) -> URL {
        let file = try allowedPath(path, role: "destination")
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw .badRequest("'\(path)' is a directory.")
        }
        return file
    }

    private func allowedPath(_ path: String, role: String) throws(BackgroundAPI.Failure) -> URL {
        guard path.hasPrefix("/"), !path.hasSuffix("/"), !path.contains("\0"),
            !path.split(separator: "/").contains(where: { $0 == ".." || $0 == "." })
        else {
            throw .badRequest("The \(role) must be an absolute path to a file, without '.' or '..'.")
        }
        let file = URL(fileURLWithPath: path)
        let directory = PathConfinement.resolvedExistingPrefix(file.deletingLastPathComponent())
        guard PathConfinement.contains(resolved: resolvedDirectories, file) else {
            let allowed = resolvedDirectories
            throw .forbiddenPath(
                "'\(path)' is outside the directories the daemon may use (\(allowed.joined(separator: ", ")))."
            )
        }
        return directory.appendingPathComponent(file.lastPathComponent)
    }

    private static func validSession(_ name: String) throws(BackgroundAPI.Failure) -> String {
        guard BackgroundAPI.isValidSession(name) else {
            throw .badRequest("A session identifier is 1 to 128 letters, digits, '.', '_' or '-'.")
        }
        return name
    }

    private static func taskID(_ text: String) throws(BackgroundAPI.Failure) -> Int64 {
        guard let id = Int64(text), id > 0 else { throw .badRequest("'\(text)' is not a task identifier.") }
        return id
    }
}
