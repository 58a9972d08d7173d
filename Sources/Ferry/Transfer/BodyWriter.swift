import Foundation
import NIOCore

/// Streams one response body into the partial file at an offset: skips bytes the server
/// repeated, refuses bytes past what the headers promised, reports progress, checkpoints.
struct BodyWriter {
    let file: PartialFile
    let task: SessionTask
    private var position: Int64
    private var skip: Int64
    private let limit: Int64?
    private(set) var written: Int64 = 0

    /// ``SessionConfiguration/maximumFileSize``: no byte is written past it.
    private let maximumFileSize: Int64?

    init(file: PartialFile, task: SessionTask, offset: Int64, skip: Int64, limit: Int64?, maximumFileSize: Int64?) {
        self.file = file
        self.task = task
        self.position = offset
        self.skip = skip
        self.limit = limit
        self.maximumFileSize = maximumFileSize
    }

    mutating func write(_ body: ResponseBody, checkpoint: Checkpoint?) async throws {
        var meter = ProgressMeter(task: task, direction: .written)
        var lastCheckpoint = (bytes: position, time: ContinuousClock.now)
        var iterator = body.makeAsyncIterator()
        while true {
            try await task.client.waitWhilePaused()
            guard let chunk = try await iterator.next() else { break }
            let count = try chunk.withUnsafeReadableBytes { bytes -> Int64 in
                var slice = bytes
                if skip > 0 {
                    let dropped = Int(min(skip, Int64(slice.count)))
                    slice = UnsafeRawBufferPointer(rebasing: slice[dropped...])
                    skip -= Int64(dropped)
                }
                if let limit, written + Int64(slice.count) > limit {
                    throw FerryError(.badServerResponse, "The server sent more bytes than its headers announced.")
                }
                if let maximumFileSize, position + Int64(slice.count) > maximumFileSize {
                    throw FerryError(
                        .bodyTooLarge(limit: maximumFileSize),
                        "The file grows past the \(maximumFileSize)-byte limit."
                    )
                }
                try file.write(slice, at: position)
                return Int64(slice.count)
            }
            position += count
            written += count
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
