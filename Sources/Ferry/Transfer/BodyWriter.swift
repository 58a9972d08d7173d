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

    /// Writes `body` into the file, checkpointing every ``Checkpoint/interval`` off the
    /// writing path (``CheckpointsAside``); returns or throws only once no checkpoint runs.
    mutating func write(_ body: ResponseBody, checkpoint: Checkpoint?) async throws {
        var meter = ProgressMeter(task: task, direction: .written)
        let file = file
        var position = offset + written
        var lastCheckpoint = ContinuousClock.now
        // A body from byte 0 is first recorded once a few MiB are in (Checkpoint.firstRecord).
        var recorded = offset > 0
        let aside = checkpoint.map { _ in CheckpointsAside() }
        do {
            try await reader.read(body) { chunk in
                try chunk.withUnsafeReadableBytes { try file.write($0, at: position) }
                let count = Int64(chunk.readableBytes)
                position += count
                meter.add(count)
                if let checkpoint, let aside, ContinuousClock.now - lastCheckpoint >= Checkpoint.interval,
                    !aside.isBusy, let work = checkpoint.aside(upTo: position), try aside.start(work)
                {
                    lastCheckpoint = .now
                    recorded = true
                } else if !recorded, let checkpoint, let aside, position >= Checkpoint.firstRecordBytes, !aside.isBusy {
                    recorded = true
                    if let work = checkpoint.firstRecord() { _ = try aside.start(work) }
                }
            }
        } catch {
            // The failure is the body's; a checkpoint's own failure after it says less.
            try? await aside?.finish()
            throw error
        }
        try await aside?.finish()
        meter.finish()
        reader.publishTrailers()
    }
}
