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
///
/// That bound is for a power loss. A process that dies (`kill -9`, a crash) loses less:
/// within the same boot the bytes it wrote stay in the file, and resume data names the boot
/// it was written in (``ResumeData/bootID``), so a continuation in that boot keeps them
/// (one connection; ``firstRecord()`` covers the time before the first checkpoint).
struct Checkpoint {
    /// How often a download records what it has on disk.
    static let interval: Duration = .seconds(1)
    /// With a split download, also after this many bytes since the last checkpoint.
    static let bytes: Int64 = 4 << 20

    let file: PartialFile
    /// Everything but the byte count and the time.
    let template: ResumeData
    let enabled: Bool
    /// The download's entry in the session's resume store, if it has one.
    let stored: ResumeStore.Slot?
    let logger: Logger
    /// Hears of each checkpoint written (an event on the task's span).
    let telemetry: TaskTelemetry?

    /// Writes the checkpoint here: ``aside(upTo:)``'s work for every byte written so far.
    func write() throws {
        try aside(upTo: file.length)?()
    }

    /// The checkpoint of the file's first `length` bytes as work for another thread: the
    /// file flushed (every byte written so far, so at least `length`), then resume data that
    /// claims `length` bytes. Nothing of the file's owner is touched by the work: the owner
    /// goes on writing past `length` while it runs, and waits for it
    /// (``CheckpointsAside/finish()``) before it closes, cuts or describes the file again.
    func aside(upTo length: Int64) -> (@Sendable () throws -> Void)? {
        guard enabled else { return nil }
        let (template, recorder, flusher) = (template, recorder(), file.flusher)
        return {
            try flusher?.flush()
            var resumeData = template
            resumeData.bytesOnDisk = length
            try recorder.record(resumeData, trace: ["bytes-on-disk": "\(length)"])
        }
    }

    /// The first record of a body written from byte 0, made once ``firstRecordBytes`` are
    /// written, before the first checkpoint is due: resume data that claims no byte
    /// (nothing is flushed yet, so a power loss can take nothing it claims) but names the
    /// version, the partial file and this boot. A process killed before its first
    /// checkpoint is then continued, in the same boot, from the bytes it wrote
    /// (``ResumeData/keepsWrittenBytes``) instead of from nothing. Bodies shorter than
    /// ``firstRecordBytes`` never make one. `nil` when checkpoints are off or the machine
    /// has no boot id.
    func firstRecord() -> (@Sendable () throws -> Void)? {
        guard enabled, FileSystem.bootID != nil else { return nil }
        let (template, recorder) = (template, recorder())
        return {
            var resumeData = template
            resumeData.bytesOnDisk = 0
            try recorder.record(resumeData, trace: ["bytes-on-disk": "0", "first-record": "true"])
        }
    }

    /// How much of a body from byte 0 is written before its ``firstRecord()``.
    static let firstRecordBytes: Int64 = 4 << 20

    /// Records a split download's plan through `writer` (safe to call from any of its
    /// connections): the file flushed, then resume data whose `bytesOnDisk` is the plan's
    /// gap-free prefix and whose `segments` say how far each part came.
    func segmentRecorder(_ writer: SegmentWriter) -> @Sendable (SegmentPlan) throws -> Void {
        let (template, enabled, recorder) = (template, enabled, recorder())
        return { plan in
            guard enabled else { return }
            try writer.flush()
            var resumeData = template
            resumeData.bytesOnDisk = plan.contiguousPrefix
            resumeData.segments = plan.segments
            try recorder.record(resumeData, trace: ["segments-written": "\(plan.written)"])
        }
    }

    /// Where a checkpoint's resume data goes once the bytes it claims are flushed, usable
    /// from any thread: the metadata file beside the partial file (which may now have one),
    /// then the session's store, the trace and the task's span.
    private func recorder() -> Recorder {
        file.mayHaveMetadata = true
        return Recorder(metadataURL: file.metadataURL, stored: stored, logger: logger, telemetry: telemetry)
    }

    /// Writes resume data whose bytes are on stable storage: see ``recorder()``.
    private struct Recorder: Sendable {
        let metadataURL: URL
        let stored: ResumeStore.Slot?
        let logger: Logger
        let telemetry: TaskTelemetry?

        func record(_ checkpoint: ResumeData, trace: Logger.Metadata) throws {
            var resumeData = checkpoint
            resumeData.createdAt = ResumeData.wholeSeconds(Date())
            try FileSystem.writeAtomically(resumeData.encoded(), to: metadataURL)
            try stored?.save(resumeData)
            logger.trace("checkpoint", metadata: trace)
            telemetry?.checkpointed(bytes: resumeData.bytesOnDisk)
        }
    }

    /// Removes the metadata (file and store entry), flushing the removal to stable storage,
    /// before the bytes it describes are discarded or replaced.
    func invalidate() throws {
        file.removeMetadata()
        if let stored {
            stored.remove()
            if let directory = stored.store.directory { FileSystem.syncDirectory(directory) }
        }
        FileSystem.syncDirectory(file.url.deletingLastPathComponent())
    }
}
