import Ferry
import Foundation
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension BackgroundDaemon {
    /// The ends of transfers on their way into the store, and who waits for them: a value
    /// the daemon's actor owns, with no I/O of its own; ``write(_:in:)`` says what an end
    /// writes in a ``BackgroundStore/Batch``.
    ///
    /// An end is added when its transfer's events finish; the first of a group is recorded
    /// with every end added before its caller takes the group (``takePending()``); each end
    /// is settled once, recorded or given up (``settle(_:failure:)``), which hands back its
    /// waiters to resume.
    struct EndBook {
        /// A transfer that ended, and why the daemon stopped it (`nil`: it ended by itself).
        struct End: Sendable {
            var id: Int64
            var transfer: SessionTask
            var reason: BackgroundTaskRecord.State?
        }

        /// Waits before each new attempt to record a task's end in a store that refused it.
        static let retryDelays: [Duration] = [.milliseconds(100), .milliseconds(500), .seconds(2), .seconds(5)]

        /// Ends not yet taken to be recorded, in the order they came.
        private var pending: [End] = []
        /// The tasks whose end is not settled: pending or being recorded.
        private var recording: Set<Int64> = []
        /// Who waits for a task's end to be settled (a pause answers with the state it left).
        private var waiters: [Int64: [CheckedContinuation<Void, Never>]] = [:]
        /// Tasks that ended but whose end the store refused to record, with why.
        private(set) var unrecorded: [Int64: String] = [:]

        /// Adds `end`; `true` when it is the first of a group, whose caller records it.
        mutating func add(_ end: End) -> Bool {
            recording.insert(end.id)
            pending.append(end)
            return pending.count == 1
        }

        /// The ends added since the last group, in order; the next end starts a group.
        mutating func takePending() -> [End] {
            defer { pending = [] }
            return pending
        }

        /// Whether task `id` ended and its end is not settled yet.
        func isRecording(_ id: Int64) -> Bool { recording.contains(id) }

        /// `waiter` goes on once task `id`'s end is settled.
        mutating func wait(for id: Int64, _ waiter: CheckedContinuation<Void, Never>) {
            waiters[id, default: []].append(waiter)
        }

        /// Task `id`'s end is recorded (`failure` `nil`) or given up, with what clients are
        /// told; returns its waiters, to resume.
        mutating func settle(_ id: Int64, failure: String?) -> [CheckedContinuation<Void, Never>] {
            recording.remove(id)
            unrecorded[id] = failure
            return waiters.removeValue(forKey: id) ?? []
        }

        /// What the daemon's log says of a recorded end.
        struct Message: Sendable {
            var level: Logger.Level
            var text: String
        }

        /// Writes the end of `end`'s task (as its transfer ended, stopped for its reason) in
        /// `batch`, and returns what to log once it is committed.
        static func write(_ end: End, in batch: inout BackgroundStore.Batch) throws -> Message {
            let id = end.id
            let transfer = end.transfer
            if let error = transfer.error {
                switch end.reason {
                case .paused?:
                    try batch.update(id) { $0.state = .paused }
                    return Message(level: .info, text: "task \(id) paused at byte \(transfer.countOfBytesReceived)")
                case .queued?:
                    try batch.update(id) { $0.state = .queued }
                    return Message(
                        level: .info,
                        text:
                            "task \(id) stopped with the daemon at byte \(transfer.countOfBytesReceived): continues at the next start"
                    )
                case .canceled?:
                    try batch.finish(id, as: .canceled, detail: nil)
                    return Message(level: .info, text: "task \(id) canceled")
                default:
                    if let record = try batch.task(id), let next = record.mirrors?.first,
                        error.reason.isServerOrNetwork || error.reason == .checksumMismatch
                    {
                        // The next mirror continues from the checkpoint: Range with If-Range, so
                        // only a mirror of the same version adds to the bytes kept.
                        try batch.update(id) {
                            $0.url = next
                            $0.mirrors = Array(record.mirrors?.dropFirst() ?? []).nilIfEmpty
                            $0.state = .queued
                        }
                        return Message(
                            level: .warning,
                            text: "task \(id): \(record.url) failed (\(error)); continuing from the mirror \(next)"
                        )
                    }
                    try batch.finish(id, as: .failed, detail: error.description)
                    return Message(level: .warning, text: "task \(id) failed: \(error)")
                }
            } else if let upload = transfer as? DataTask {
                try writeUpload(id, upload, in: &batch)
                return Message(level: .info, text: "task \(id) completed: \(transfer.countOfBytesSent) bytes sent")
            } else {
                let received = transfer.countOfBytesReceived
                let file = (transfer as? DownloadTask)?.fileURL?.path
                try batch.finish(id, as: .completed, detail: file, received: received)
                return Message(level: .info, text: "task \(id) completed: \(received) bytes → \(file ?? "")")
            }
        }

        /// An upload's response: its body to the task's destination, its status and fields to
        /// the record (in `batch`), then the event.
        private static func writeUpload(_ id: Int64, _ upload: DataTask, in batch: inout BackgroundStore.Batch) throws {
            guard let record = try batch.task(id) else { return }
            let destination = URL(fileURLWithPath: record.destination)
            do {
                try FileManager.default.createDirectory(
                    at: destination.deletingLastPathComponent(),
                    withIntermediateDirectories: true
                )
                try (upload.receivedData ?? Data()).write(to: destination, options: .atomic)
            } catch {
                try batch.finish(
                    id,
                    as: .failed,
                    detail: "Cannot write the response to '\(destination.path)': \(error)."
                )
                return
            }
            let response = upload.response
            let sent = upload.countOfBytesSent
            try batch.finish(id, as: .completed, detail: destination.path) {
                $0.responseStatus = response?.statusCode
                $0.responseHeaders = response.map {
                    Dictionary($0.headers.map { ($0.name, $0.value) }) { first, _ in first }
                }
                $0.bytesReceived = sent
                $0.bytesExpected = sent
            }
        }
    }
}

extension Array {
    /// `nil` for an empty array.
    fileprivate var nilIfEmpty: [Element]? { isEmpty ? nil : self }
}
