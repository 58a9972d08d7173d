package import Foundation

/// Something that happened to a background task and that its session has not acknowledged
/// yet: kept until a process attached to the session confirms it by sequence number, so it
/// is delivered exactly once even when nobody was attached when it happened.
package struct BackgroundEventRecord: Codable, Sendable, Equatable {
    package enum Kind: String, Codable, Sendable {
        /// The file is complete at ``BackgroundTaskRecord/destination``.
        case completed
        case failed
        case canceled
    }

    /// Increasing over the whole store: the order events happened in.
    package var seq: Int64?
    package var session: String
    package var taskId: Int64
    package var kind: Kind
    /// The file (completed) or the reason (failed), for people.
    package var detail: String?
    package var createdAt: Date

    package init(session: String, taskId: Int64, kind: Kind, detail: String?, createdAt: Date = Date()) {
        self.session = session
        self.taskId = taskId
        self.kind = kind
        self.detail = detail
        self.createdAt = createdAt
    }
}
