package import Foundation

/// The daemon's socket API, shared by its server and its clients. The protocol is written
/// down in `docs/DaemonProtocol.md`.
package enum BackgroundAPI {
    /// The largest request body the daemon reads; larger ones get `413`.
    package static let maximumBodySize = 64 * 1024

    /// The largest request body the daemon reads for `target`: a batch of tasks may be
    /// larger than any other request.
    package static func maximumBodySize(for target: String) -> Int {
        target.split(separator: "?").first == "/v1/tasks/batch" ? AddTasks.maximumBodySize : maximumBodySize
    }

    /// A refused request: an HTTP status, a stable code, and a message for people.
    package struct Failure: Error, Codable, Sendable, Equatable {
        package var status: Int
        package var code: String
        package var message: String

        package init(_ status: Int, _ code: String, _ message: String) {
            self.status = status
            self.code = code
            self.message = message
        }

        package static func badRequest(_ message: String) -> Failure { Failure(400, "badRequest", message) }
        package static func notFound(_ message: String) -> Failure { Failure(404, "notFound", message) }
        package static func forbiddenPath(_ message: String) -> Failure { Failure(403, "forbiddenPath", message) }
    }

    /// `POST /v1/tasks`.
    package struct AddTask: Codable, Sendable, Equatable {
        package var url: String
        package var destination: String
        package var session: String?
        package var headers: [String: String]?
        package var priority: Double?
        package var earliestBeginDate: Date?
        package var discretionary: Bool?
        package var taskDescription: String?
        /// `download` (the default) or `upload`.
        package var kind: BackgroundTaskRecord.Kind?
        /// An upload's method: `POST` (the default), `PUT` or `PATCH`.
        package var method: String?
        /// An upload's body: an absolute path under an allowed directory.
        package var sourceFile: String?
        /// Most connections a download may use, 1 … 64 (segments, as `ferry get -s`).
        package var connections: Int?
        /// Other URLs of the same file, tried in order when the one before fails (a download's).
        package var mirrors: [String]?
        /// The file's expected digest, `ALGORITHM=HEX` (a download's).
        package var checksum: String?

        package init(url: String, destination: String, session: String? = nil) {
            self.url = url
            self.destination = destination
            self.session = session
        }

        package static let fields: Set<String> = [
            "url", "destination", "session", "headers", "priority", "earliestBeginDate", "discretionary",
            "taskDescription", "kind", "method", "sourceFile", "connections", "mirrors", "checksum",
        ]
    }

    /// `POST /v1/events/ack`.
    package struct Acknowledge: Codable, Sendable, Equatable {
        package var session: String
        package var through: Int64

        package init(session: String, through: Int64) {
            self.session = session
            self.through = through
        }

        package static let fields: Set<String> = ["session", "through"]
    }

    /// `GET /v1/tasks`: a page of tasks, and how many tasks are in each state (of the
    /// session asked for, or of all; states with none left out).
    package struct TaskList: Codable, Sendable {
        package var tasks: [BackgroundTaskRecord]
        package var totals: [String: Int]?

        package init(tasks: [BackgroundTaskRecord], totals: [String: Int]? = nil) {
            self.tasks = tasks
            self.totals = totals
        }
    }

    /// `POST /v1/tasks/batch`: many tasks added in one transaction, or none.
    package struct AddTasks: Codable, Sendable, Equatable {
        package var tasks: [AddTask]

        package init(tasks: [AddTask]) { self.tasks = tasks }

        package static let fields: Set<String> = ["tasks"]
        /// The most tasks one batch may hold.
        package static let maximumCount = 10_000
        /// The largest body a batch may have (a request of one task is held to
        /// ``BackgroundAPI/maximumBodySize``).
        package static let maximumBodySize = 16 * 1024 * 1024
    }

    /// `POST /v1/tasks/batch`'s answer: the ids of the tasks added, in the order asked.
    package struct AddedTasks: Codable, Sendable {
        package var ids: [Int64]
        package init(ids: [Int64]) { self.ids = ids }
    }

    /// `GET /v1/sessions`: the background sessions the daemon knows.
    package struct SessionInfo: Codable, Sendable, Equatable {
        package var identifier: String
        package var createdAt: Date
        /// When a process of the session last asked for its events.
        package var lastAttachedAt: Date?
        package var tasks: Int
        /// Events kept until a process acknowledges them.
        package var pendingEvents: Int

        package init(identifier: String, createdAt: Date, lastAttachedAt: Date?, tasks: Int, pendingEvents: Int) {
            self.identifier = identifier
            self.createdAt = createdAt
            self.lastAttachedAt = lastAttachedAt
            self.tasks = tasks
            self.pendingEvents = pendingEvents
        }
    }

    package struct SessionList: Codable, Sendable {
        package var sessions: [SessionInfo]
        package init(sessions: [SessionInfo]) { self.sessions = sessions }
    }

    package struct EventList: Codable, Sendable {
        package var events: [BackgroundEventRecord]
        package init(events: [BackgroundEventRecord]) { self.events = events }
    }

    /// Dates are RFC 3339 with milliseconds (an `earliestBeginDate` keeps its precision);
    /// without them is accepted too.
    package static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = Timestamp.encoding(milliseconds: true)
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// The instant an RFC 3339 date-time in a query names (`finishedSince`).
    package static func date(_ text: String) -> Date? { Timestamp.parse(text) }

    /// `date` as a query gives it: RFC 3339 in UTC, with milliseconds.
    package static func text(_ date: Date) -> String { Timestamp.format(date, milliseconds: true) }

    package static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = Timestamp.decoding
        return decoder
    }

    /// Whether `name` can identify a background session: 1 to 128 of `A-Z a-z 0-9 . _ -`.
    package static func isValidSession(_ name: String) -> Bool {
        (1...128).contains(name.count)
            && name.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                    || "._-".unicodeScalars.contains($0)
            }
    }

    /// Decodes a request body strictly: a JSON object with only `fields`, each of its type.
    package static func decode<Body: Decodable>(
        _ type: Body.Type,
        from data: Data,
        fields: Set<String>
    ) throws(Failure)
        -> Body
    {
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw .badRequest("The body is not a JSON object.")
        }
        if let unknown = Set(object.keys).subtracting(fields).sorted().first {
            throw .badRequest("Unknown field '\(unknown)'.")
        }
        do {
            return try decoder.decode(Body.self, from: data)
        } catch {
            throw .badRequest("The body does not match the request: \(Self.describe(error)).")
        }
    }

    /// Decodes a `POST /v1/tasks/batch` body strictly: `{"tasks": [...]}`, 1 to
    /// ``AddTasks/maximumCount`` tasks, each with only ``AddTask/fields``. One pass of the
    /// decoder, no tree of the whole body beside it.
    package static func decodeBatch(_ data: Data) throws(Failure) -> AddTasks {
        let batch: StrictBatch
        do {
            batch = try decoder.decode(StrictBatch.self, from: data)
        } catch let unknown as UnknownField {
            throw .badRequest(
                unknown.index.map { "tasks[\($0)]: unknown field '\(unknown.name)'." }
                    ?? "Unknown field '\(unknown.name)'."
            )
        } catch {
            throw .badRequest("The body does not match the request: \(Self.describe(error)).")
        }
        guard (1...AddTasks.maximumCount).contains(batch.tasks.count) else {
            throw .badRequest("A batch holds 1 to \(AddTasks.maximumCount) tasks, not \(batch.tasks.count).")
        }
        return AddTasks(tasks: batch.tasks)
    }

    /// A field a request does not have.
    private struct UnknownField: Error {
        var index: Int?
        var name: String
    }

    /// Any key of a JSON object.
    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// `{"tasks": [...]}` with no field beyond ``AddTasks/fields``, nor in a task beyond
    /// ``AddTask/fields``.
    private struct StrictBatch: Decodable {
        var tasks: [AddTask] = []

        init(from decoder: any Decoder) throws {
            let object = try decoder.container(keyedBy: AnyKey.self)
            if let unknown = object.allKeys.map(\.stringValue).filter({ !AddTasks.fields.contains($0) }).min() {
                throw UnknownField(name: unknown)
            }
            var list = try object.nestedUnkeyedContainer(forKey: AnyKey(stringValue: "tasks"))
            while !list.isAtEnd {
                tasks.append(try list.decode(StrictTask.self).task)
            }
        }
    }

    /// One task of a batch, with no field beyond ``AddTask/fields``.
    private struct StrictTask: Decodable {
        var task: AddTask

        init(from decoder: any Decoder) throws {
            let object = try decoder.container(keyedBy: AnyKey.self)
            if let unknown = object.allKeys.map(\.stringValue).filter({ !AddTask.fields.contains($0) }).min() {
                throw UnknownField(index: decoder.codingPath.last?.intValue, name: unknown)
            }
            task = try AddTask(from: decoder)
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound(let key, _)?: "'\(key.stringValue)' is missing"
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?, .dataCorrupted(let context)?:
            "'\(context.codingPath.map(\.stringValue).joined(separator: "."))' has the wrong type or value"
        default: "it cannot be decoded"
        }
    }
}
