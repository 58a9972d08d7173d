import Foundation
import Logging

/// Flushes the partial file, then writes resume data describing it (temp file + rename), so
/// that after a crash the metadata never claims bytes that are not on disk.
///
/// A download written by one connection checkpoints off its writing path (``aside(upTo:)``,
/// run by ``CheckpointsAside``) once every ``interval``: the bytes keep going to the page
/// cache while the disk flushes the ones before, as curl's and wget's writes do (they never
/// flush). A crash loses what arrived since the last checkpoint that finished: at most one
/// interval and the time one checkpoint takes. A split download's connections checkpoint
/// their plan every ``interval`` or ``bytes`` (``segmentRecorder(_:)``).
struct Checkpoint {
    /// How often a download records what it has on disk.
    static let interval: Duration = .seconds(1)
    /// With a split download, also after this many bytes since the last checkpoint.
    static let bytes: Int64 = 4 << 20

    let file: PartialFile
    /// Everything but the byte count and the time.
    let template: ResumeData
    let enabled: Bool
    let store: ResumeStore?
    let key: String
    let logger: Logger
    /// Hears of each checkpoint written (an event on the task's span).
    let telemetry: TaskTelemetry?

    func write() throws {
        guard enabled else { return }
        try file.flush()
        var resumeData = template
        resumeData.bytesOnDisk = file.length
        resumeData.createdAt = ResumeData.wholeSeconds(Date())
        try file.writeMetadata(resumeData)
        try store?.save(resumeData, for: key)
        logger.trace("checkpoint", metadata: ["bytes-on-disk": "\(resumeData.bytesOnDisk)"])
        telemetry?.checkpointed(bytes: resumeData.bytesOnDisk)
    }

    /// The checkpoint of the file's first `length` bytes as work for another thread: the
    /// file flushed (every byte written so far, so at least `length`), then resume data that
    /// claims `length` bytes. Nothing of the file's owner is touched by the work: the owner
    /// goes on writing past `length` while it runs, and waits for it
    /// (``CheckpointsAside/finish()``) before it closes, cuts or describes the file again.
    func aside(upTo length: Int64) -> (@Sendable () throws -> Void)? {
        guard enabled else { return nil }
        let (template, store, key, logger, telemetry) = (template, store, key, logger, telemetry)
        let flusher = file.flusher
        let metadataURL = file.metadataURL
        file.mayHaveMetadata = true
        return {
            try flusher?.flush()
            var resumeData = template
            resumeData.bytesOnDisk = length
            resumeData.createdAt = ResumeData.wholeSeconds(Date())
            try FileSystem.writeAtomically(resumeData.encoded(), to: metadataURL)
            try store?.save(resumeData, for: key)
            logger.trace("checkpoint", metadata: ["bytes-on-disk": "\(length)"])
            telemetry?.checkpointed(bytes: length)
        }
    }

    /// Records a split download's plan through `writer` (safe to call from any of its
    /// connections): the file flushed, then resume data whose `bytesOnDisk` is the plan's
    /// gap-free prefix and whose `segments` say how far each part came.
    func segmentRecorder(_ writer: SegmentWriter) -> @Sendable (SegmentPlan) throws -> Void {
        let (template, enabled, store, key, logger) = (template, enabled, store, key, logger)
        let telemetry = telemetry
        let metadataURL = file.metadataURL
        file.mayHaveMetadata = true
        return { plan in
            guard enabled else { return }
            try writer.flush()
            var resumeData = template
            resumeData.bytesOnDisk = plan.contiguousPrefix
            resumeData.segments = plan.segments
            resumeData.createdAt = ResumeData.wholeSeconds(Date())
            try FileSystem.writeAtomically(resumeData.encoded(), to: metadataURL)
            try store?.save(resumeData, for: key)
            logger.trace("checkpoint", metadata: ["segments-written": "\(plan.written)"])
            telemetry?.checkpointed(bytes: plan.contiguousPrefix)
        }
    }

    /// Removes the metadata (file and store entry), flushing the removal to stable storage,
    /// before the bytes it describes are discarded or replaced.
    func invalidate() throws {
        file.removeMetadata()
        if let store {
            store.remove(key)
            if let directory = store.directory { FileSystem.syncDirectory(directory) }
        }
        FileSystem.syncDirectory(file.url.deletingLastPathComponent())
    }
}
