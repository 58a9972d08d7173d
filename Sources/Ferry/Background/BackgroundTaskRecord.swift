package import Foundation

/// One transfer the daemon owns, as its store keeps it: what to fetch, where it goes, how
/// far it got, and how it ended.
///
/// The daemon's state machine over these records lives in `BackgroundScheduler`; this is
/// only the row.
package struct BackgroundTaskRecord: Codable, Sendable, Equatable {
    /// The stages of a background task. `running` rows found at start-up were interrupted
    /// (the daemon died): they are queued again and continue from their checkpoint.
    package enum State: String, Codable, Sendable, CaseIterable {
        case queued
        case running
        case paused
        case completed
        case failed
        case canceled

        /// Whether the task can still move.
        package var isFinal: Bool { self == .completed || self == .failed || self == .canceled }

        /// A name that is not a state, with what to say about it.
        package struct UnknownName: Error, Sendable {
            package var message: String
        }

        /// The states `names` name, in their order, each once: what `ferry ls --state` and
        /// the API's `state` take.
        ///
        /// - Throws: ``UnknownName`` at the first name that is not a state.
        package static func list(_ names: some Sequence<some StringProtocol>) throws(UnknownName) -> [Self] {
            var listed: [Self] = []
            for name in names {
                guard let state = Self(rawValue: String(name)) else {
                    throw UnknownName(
                        message: "'\(name)' is not a state (queued, running, paused, completed, failed, canceled, all)."
                    )
                }
                if !listed.contains(state) { listed.append(state) }
            }
            return listed
        }
    }

    /// What the task does.
    package enum Kind: String, Codable, Sendable {
        /// Fetches `url` into `destination`.
        case download
        /// Sends `sourceFile` to `url` with `method`; the response body goes to `destination`.
        case upload
    }

    /// Assigned by the store, increasing.
    package var id: Int64?
    package var kind: Kind
    /// An upload's method (`POST`, `PUT`, `PATCH`).
    package var method: String?
    /// An upload's body (absolute path).
    package var sourceFile: String?
    /// An upload's response status and header fields, once it completed.
    package var responseStatus: Int?
    package var responseHeaders: [String: String]?
    /// The background session's identifier (`ferry add` uses `cli`).
    package var session: String
    package var url: String
    /// The task's ``SessionTask/taskDescription``: how a relaunched app recognizes it.
    package var taskDescription: String?
    /// Header fields sent with the request, JSON `{name: value}`.
    package var headers: [String: String]
    /// Where the finished file goes (absolute path).
    package var destination: String
    package var state: State
    package var bytesReceived: Int64
    package var bytesExpected: Int64?
    /// Why it failed, for people.
    package var errorMessage: String?
    /// 0 (lowest) … 1 (highest); 0.5 by default, as URLSessionTask.priority.
    package var priority: Double
    /// Not started before this time (URLSessionTask.earliestBeginDate).
    package var earliestBeginDate: Date?
    /// Runs only when nothing else waits (URLSessionConfiguration.isDiscretionary).
    package var isDiscretionary: Bool
    /// Most connections the download may use (`ferry add -s`); `nil` for one.
    package var connections: Int?
    /// Other URLs of the same file not tried yet: when ``url`` fails, the first takes its
    /// place and continues from the checkpoint (Range with If-Range, so only the same version).
    package var mirrors: [String]?
    /// The file's expected digest, `ALGORITHM=HEX`, checked before it is moved into place.
    package var checksum: String?
    package var createdAt: Date
    package var finishedAt: Date?

    package init(
        session: String,
        url: String,
        headers: [String: String] = [:],
        destination: String,
        priority: Double = 0.5,
        earliestBeginDate: Date? = nil,
        isDiscretionary: Bool = false,
        createdAt: Date = Date()
    ) {
        kind = .download
        self.session = session
        self.url = url
        self.headers = headers
        self.destination = destination
        state = .queued
        bytesReceived = 0
        self.priority = priority
        self.earliestBeginDate = earliestBeginDate
        self.isDiscretionary = isDiscretionary
        self.createdAt = createdAt
    }

    /// The key of its resume data in the store.
    package var resumeKey: String { Self.resumeKey(for: id ?? 0) }

    /// The key of task `id`'s resume data, and back.
    package static func resumeKey(for id: Int64) -> String { "task-\(id)" }

    package static func id(forResumeKey key: String) -> Int64? {
        key.hasPrefix("task-") ? Int64(key.dropFirst(5)) : nil
    }
}

extension BackgroundTaskRecord {
    /// Header fields whose values are credentials: never shown, never sent back by the API.
    static func isSecret(_ name: String) -> Bool {
        let name = name.lowercased()
        return HeaderFields.credentialNames.contains(name) || name == "x-api-key"
            || name.contains("token") || name.contains("secret") || name.contains("password")
    }

    /// The record as the daemon's API returns it and `ferry ls` prints it: the value of
    /// every credential header replaced by `<redacted>` (the store keeps it, readable by its
    /// user alone, to send it).
    package var redacted: BackgroundTaskRecord {
        var copy = self
        for name in headers.keys where Self.isSecret(name) { copy.headers[name] = "<redacted>" }
        return copy
    }

    /// The record as `ferry ls` shows it: ``redacted``, and the password and the signed
    /// query parameters of every URL in it (its own, its mirrors', one its error or its
    /// response's header fields quote) replaced by `REDACTED` (``Redaction``).
    package var withURLsRedacted: BackgroundTaskRecord {
        var copy = redacted
        copy.url = Redaction.redactingURLs(in: url)
        copy.mirrors = mirrors?.map(Redaction.redactingURLs(in:))
        copy.errorMessage = errorMessage.map(Redaction.redactingURLs(in:))
        copy.responseHeaders = responseHeaders?.mapValues(Redaction.redactingURLs(in:))
        return copy
    }
}
