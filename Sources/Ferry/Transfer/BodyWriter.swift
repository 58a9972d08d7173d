import Foundation
import NIOCore

/// Streams one response body into the partial file at an offset, read by the one
/// ``BodyReader`` loop (which drops bytes the server repeated, refuses bytes past what the
/// headers promised and past ``SessionConfiguration/maximumFileSize``): writes, reports
/// progress, checkpoints.
struct BodyWriter {
    let file: PartialFile
    let task: SessionTask
    /// Where the body's first wanted byte goes.
    private let offset: Int64
    private var reader: BodyReader

    /// Bytes of the body written so far.
    var written: Int64 { reader.read }

    init(file: PartialFile, task: SessionTask, offset: Int64, skip: Int64, limit: Int64?, maximumFileSize: Int64?) {
        self.file = file
        self.task = task
        self.offset = offset
        self.reader = BodyReader(
            task: task,
            skip: skip,
            announced: limit,
            limit: .file(maximumFileSize, from: offset)
        )
    }

    mutating func write(_ body: ResponseBody, checkpoint: Checkpoint?) async throws {
        var meter = ProgressMeter(task: task, direction: .written)
        let file = file
        var position = offset + written
        var lastCheckpoint = (bytes: position, time: ContinuousClock.now)
        try await reader.read(body) { chunk in
            try chunk.withUnsafeReadableBytes { try file.write($0, at: position) }
            let count = Int64(chunk.readableBytes)
            position += count
            meter.add(count)
            if let checkpoint,
                position - lastCheckpoint.bytes >= Checkpoint.bytes
                    || ContinuousClock.now - lastCheckpoint.time >= Checkpoint.interval
            {
                try checkpoint.write()
                lastCheckpoint = (position, .now)
            }
        }
        meter.finish()
    }
}
