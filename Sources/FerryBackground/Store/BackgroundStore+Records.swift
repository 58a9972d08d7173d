package import Ferry
package import GRDB

// The store's rows are the API's records: their columns are their Codable keys.

extension BackgroundTaskRecord: FetchableRecord, MutablePersistableRecord {
    package static let databaseTableName = "task"

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
