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

    func write() throws {
        guard enabled else { return }
        try file.flush()
        var resumeData = template
        resumeData.bytesOnDisk = file.length
        resumeData.createdAt = ResumeData.wholeSeconds(Date())
        try file.writeMetadata(resumeData)
        try store?.save(resumeData, for: key)
        logger.trace("checkpoint", metadata: ["bytes-on-disk": "\(resumeData.bytesOnDisk)"])
    }

    /// Removes the metadata (file and store entry), flushing the removal to stable storage,
    /// before the bytes it describes are discarded or replaced.
    func invalidate() throws {
        FileSystem.removeIfPresent(file.metadataURL)
        if let store {
            store.remove(key)
            if let directory = store.directory { FileSystem.syncDirectory(directory) }
        }
        FileSystem.syncDirectory(file.url.deletingLastPathComponent())
    }
}
