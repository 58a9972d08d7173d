package import Ferry
import Foundation
package import GRDB

// The store's rows are the API's records: their columns are their Codable keys.

extension BackgroundTaskRecord: FetchableRecord, MutablePersistableRecord {
    package static let databaseTableName = "task"

    /// A task from its row, column by column.
    ///
    /// What the Codable default would decode, without its decoder: every start of a task
    /// reads its row, and the generic decoder (a container per row, a key lookup and a
    /// dynamic cast per column) cost more than the statement. Columns the row lacks (a
    /// `SELECT` of some of them) are `nil`; the JSON columns are GRDB's encoding of the
    /// nested values (`{}` and `NULL` need no decoder).
    ///
    /// - Throws: `DatabaseError`-free decoding errors: a state or kind that is not one, a
    ///   JSON column that does not decode.
    package init(row: Row) throws {
        let kindName: String = try row.decode(forColumn: "kind")
        let stateName: String = try row.decode(forColumn: "state")
        guard let kind = Kind(rawValue: kindName), let state = State(rawValue: stateName) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "A task row of kind '\(kindName)' in state '\(stateName)'.")
            )
        }
        self.init(
            session: try row.decode(forColumn: "session"),
            url: try row.decode(forColumn: "url"),
            headers: try Self.json([String: String].self, row, "headers") ?? [:],
            destination: try row.decode(forColumn: "destination"),
            priority: try row.decode(forColumn: "priority"),
            earliestBeginDate: try row.decode(forColumn: "earliestBeginDate"),
            isDiscretionary: try row.decode(forColumn: "isDiscretionary"),
            createdAt: try row.decode(forColumn: "createdAt")
        )
        self.kind = kind
        self.state = state
        id = try row.decode(forColumn: "id")
        method = try row.decode(forColumn: "method")
        sourceFile = try row.decode(forColumn: "sourceFile")
        responseStatus = try row.decode(forColumn: "responseStatus")
        responseHeaders = try Self.json([String: String].self, row, "responseHeaders")
        taskDescription = try row.decode(forColumn: "taskDescription")
        bytesReceived = try row.decode(forColumn: "bytesReceived")
        bytesExpected = try row.decode(forColumn: "bytesExpected")
        errorMessage = try row.decode(forColumn: "errorMessage")
        connections = try row.decode(forColumn: "connections")
        mirrors = try Self.json([String].self, row, "mirrors")
        checksum = try row.decode(forColumn: "checksum")
        finishedAt = try row.decode(forColumn: "finishedAt")
    }

    /// A nested value GRDB stored as JSON text, or `nil` for `NULL` (or a missing column).
    private static func json<Value: Decodable>(_ type: Value.Type, _ row: Row, _ column: String) throws -> Value? {
        guard let text: String = try row.decode(forColumn: column) else { return nil }
        if text == "{}", let empty = [String: String]() as? Value { return empty }
        return try JSONDecoder().decode(Value.self, from: Data(text.utf8))
    }

    package mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension BackgroundEventRecord: FetchableRecord, MutablePersistableRecord {
    package static let databaseTableName = "event"

    package mutating func didInsert(_ inserted: InsertionSuccess) {
        seq = inserted.rowID
    }
}
