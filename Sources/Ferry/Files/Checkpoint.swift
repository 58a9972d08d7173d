import Foundation
import Logging

/// Flushes the partial file, then writes resume data describing it (temp file + rename), so
/// that after a crash the metadata never claims bytes that are not on disk.
struct Checkpoint {
    static let interval: Duration = .seconds(1)
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
