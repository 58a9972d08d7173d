package import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A download's partial file: created 0600 in the session's downloads directory (or
/// reopened to resume), written with large positioned writes, flushed with `fsync(2)`
/// before any metadata that describes it is written, and before it is handed on.
///
/// The file is known by its descriptor, and its directory by a descriptor held open from
/// the moment it was verified: reading it back (checksum, decoding) goes through the
/// file's descriptor, and the final move renames it relative to the directory's, after
/// checking that the name still holds this very file. Renaming the directory away or
/// putting another file at the partial's path changes nothing Ferry reads or delivers.
///
/// Not thread-safe: one transfer owns it.
package final class PartialFile {
    let url: URL
    /// `url`'s path and last component, worked out once.
    let path: String
    private let name: String
    private var descriptor: Int32
    /// The directory the file lives in, opened when it was verified.
    private let directory: HeldDirectory
    /// The file's device and inode, to recognise it by name again.
    private let identity: FileSystem.Identity
    /// Bytes from the start of the file that this download has written or kept.
    private(set) var length: Int64 = 0

    /// Creates a new, empty partial file in `directory` (created 0700 if missing; see
    /// ``FileSystem/openPartialsDirectory(_:isDefault:)``).
    ///
    /// - Parameters:
    ///   - directory: where the file is made.
    ///   - slot: where `directory` is kept open between files: by default
    ///     ``HeldDirectorySlot/defaultPartials`` for the default partials directory, none
    ///     for another (it is opened for this file alone).
    convenience init(in directory: URL, slot: HeldDirectorySlot? = nil) throws {
        try self.init(inDirectoryAt: directory.path, slot: slot)
    }

    /// ``init(in:slot:)`` with the directory's path (a session's
    /// ``SessionConfiguration/downloadsDirectory``, worked out once).
    convenience init(inDirectoryAt path: String, slot: HeldDirectorySlot? = nil) throws {
        let name = Self.newName()
        let slot = slot ?? (FileSystem.isDefaultPartialsDirectory(path) ? .defaultPartials : nil)
        var held =
            try slot?.partials(path)
            ?? HeldDirectory(descriptor: try FileSystem.openPartialsDirectory(path, isDefault: false))
        var descriptor = Self.create(name, in: held)
        if descriptor < 0 && errno == ENOENT, let slot {
            // The held directory was removed (a temporary-files cleaner, while it stood
            // empty): open it again, made anew.
            held = try slot.partials(path, replacing: held)
            descriptor = Self.create(name, in: held)
        }
        try self.init(created: descriptor, named: name, in: held, path: path)
    }

    /// Creates a new, empty partial file in the directory `other` lives in: the decoded
    /// body of a coded download.
    convenience init(beside other: PartialFile) throws {
        let name = Self.newName()
        let path = FileSystem.splitPath(other.path).directory
        try self.init(created: Self.create(name, in: other.directory), named: name, in: other.directory, path: path)
    }

    /// A file just created (`descriptor`, or -1 with `errno` set) as `name` in `directory`,
    /// at `directoryPath`.
    private init(
        created descriptor: Int32,
        named name: String,
        in directory: HeldDirectory,
        path directoryPath: String
    ) throws {
        self.name = name
        path = FileSystem.joinPath(directoryPath, name)
        url = URL(fileURLWithPath: path, isDirectory: false)
        self.directory = directory
        self.descriptor = descriptor
        guard descriptor >= 0, let identity = FileSystem.Identity(descriptor: descriptor) else {
            let failure = FileSystem.error("Cannot create a partial file in '\(directoryPath)'")
            if descriptor >= 0 { close(descriptor) }
            throw failure
        }
        self.identity = identity
    }

    /// A new partial file's name: `.ferry-<uuid>.partial`.
    static func newName() -> String {
        ".ferry-\(randomIdentifier()).partial"
    }

    /// Creates `name` in `directory`, 0600, never an existing file or a link: its descriptor,
    /// or -1 with `errno` set.
    private static func create(_ name: String, in directory: HeldDirectory) -> Int32 {
        name.withCString { openat(directory.descriptor, $0, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0o600) }
    }

    /// A random (version 4) UUID's 36 characters in lower case, as partial files are named.
    /// From one `getentropy(3)`, a single `getrandom(2)` (`UUID()` opens and reads
    /// `/dev/urandom` each time; two `SystemRandomNumberGenerator.next()` are two calls).
    private static func randomIdentifier() -> String {
        let digits: StaticString = "0123456789abcdef"
        var bytes: (UInt64, UInt64) = (0, 0)
        #if canImport(Glibc)
        let filled = withUnsafeMutableBytes(of: &bytes) { getentropy($0.baseAddress, $0.count) } == 0
        #else
        let filled = false
        #endif
        if !filled {
            var generator = SystemRandomNumberGenerator()
            bytes = (generator.next(), generator.next())
        }
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = raw[6] & 0x0F | 0x40
            raw[8] = raw[8] & 0x3F | 0x80
        }
        return String(unsafeUninitializedCapacity: 36) { out in
            var at = 0
            withUnsafeBytes(of: bytes) { raw in
                for (index, byte) in raw.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        out[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    out[at] = digits.utf8Start[Int(byte >> 4)]
                    out[at + 1] = digits.utf8Start[Int(byte & 0x0F)]
                    at += 2
                }
            }
            return at
        }
    }

    /// Whether `url` names a partial file as Ferry creates them (`.ferry-<uuid>.partial`).
    /// Resume data comes from outside the process: only such files are ever reopened,
    /// truncated or removed on its word, never an arbitrary path it names.
    static func isPartialFileName(_ url: URL) -> Bool {
        let name = url.lastPathComponent
        guard name.hasPrefix(".ferry-"), name.hasSuffix(".partial") else { return false }
        let id = name.dropFirst(".ferry-".count).dropLast(".partial".count)
        return id.count == 36 && id.allSatisfy { $0.isHexDigit || $0 == "-" }
    }

    /// Removes a partial file named by resume data, if it is one of Ferry's (never another
    /// file that resume data from a store or a client names).
    package static func removeNamed(_ url: URL) {
        guard isPartialFileName(url) else { return }
        unlink(url.path)
        unlink(url.appendingPathExtension("resume").path)
    }

    /// Reopens a partial file to continue it, keeping its first `keep` bytes (bytes past
    /// them were never recorded as flushed and are cut off), or with `orAsMuchAs`, as many
    /// as it has up to that many (never fewer than `keep`): the bytes a process wrote
    /// before it was killed in this boot (``ResumeData/keepsWrittenBytes``). `nil` when the
    /// file is missing, shorter than `keep`, not a regular file of this user's, or not
    /// named as Ferry names partial files: the download must start over.
    init?(resuming url: URL, keep: Int64, orAsMuchAs longest: Int64? = nil) {
        self.url = url
        path = url.path
        name = url.lastPathComponent
        guard Self.isPartialFileName(url) else { return nil }
        let opened = open(url.deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard opened >= 0 else { return nil }
        directory = HeldDirectory(descriptor: opened)
        descriptor = openat(opened, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            info.st_uid == geteuid(), Int64(info.st_size) >= keep
        else {
            if descriptor >= 0 { close(descriptor) }
            return nil
        }
        let kept = longest.map { max(keep, min(Int64(info.st_size), $0)) } ?? keep
        guard ftruncate(descriptor, off_t(kept)) == 0, let identity = FileSystem.Identity(descriptor: descriptor) else {
            close(descriptor)
            return nil
        }
        self.identity = identity
        length = kept
        mayHaveMetadata = true
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Writes `bytes` at `offset`, retrying short writes and interrupted calls.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let result = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if result < 0 {
                if errno == EINTR { continue }
                throw FileSystem.error("Cannot write '\(path)'")
            }
            done += result
        }
        length = max(length, offset + Int64(bytes.count))
    }

    /// Reads up to `buffer.count` bytes at `offset` from the file's descriptor (not its
    /// path); 0 at the end.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws -> Int {
        guard offset < length, let base = buffer.baseAddress else { return 0 }
        let wanted = Int(min(Int64(buffer.count), length - offset))
        while true {
            let result = pread(descriptor, base, wanted, off_t(offset))
            if result >= 0 { return result }
            if errno != EINTR { throw FileSystem.error("Cannot read '\(path)'") }
        }
    }

    /// A second descriptor for the open file, for writers on other threads (a split
    /// download's connections); the caller closes it.
    func duplicateDescriptor() throws -> Int32 {
        let duplicate = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { throw FileSystem.error("Cannot write '\(path)' from several connections") }
        return duplicate
    }

    /// Cuts the file to `size` bytes (0 to start over).
    ///
    /// Cutting a file this download knows to be empty (just created, or already cut to 0,
    /// with nothing written since) to 0 costs no system call: every byte that reaches the
    /// file passes ``write(_:at:)`` or comes after a ``truncate(to:)`` to a greater size.
    func truncate(to size: Int64) throws {
        if size == 0, length == 0 { return }
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw FileSystem.error("Cannot truncate '\(path)'") }
        length = size
    }

    /// Flushes written data to stable storage; nothing to do on a file system held in memory
    /// (``HeldDirectory/isVolatile``), whose files a restart loses whether flushed or not.
    func flush() throws {
        try flusher?.flush()
    }

    /// ``flush()`` on NIO's pool for blocking work, so that a disk's `fsync` (milliseconds
    /// each on many disks) never holds one of Swift's few cooperative threads: with a
    /// thousand small downloads those are the threads every other download needs. In memory
    /// (`TMPDIR` on tmpfs) there is nothing to flush, and no hop to the pool and back.
    func flushAside() async throws {
        guard let flusher else { return }
        try await NIOThreadPool.singleton.runIfActive { try flusher.flush() }
    }

    /// What flushes the file from another thread while its owner goes on writing (a
    /// checkpoint off the writing path); `nil` when there is nothing to flush: the file is
    /// closed, or held in memory.
    ///
    /// Valid while the file stays open: its owner waits for every flush it started before it
    /// closes, truncates or discards the file.
    var flusher: Flusher? {
        guard descriptor >= 0, !directory.isVolatile else { return nil }
        return Flusher(descriptor: descriptor, path: path)
    }

    /// Flushes an open partial file's written bytes to stable storage, from any thread.
    struct Flusher: Sendable {
        let descriptor: Int32
        let path: String

        /// `fsync(2)`: every byte written before the call is on stable storage after it.
        func flush() throws { try PartialFile.flush(descriptor, path: path) }
    }

    private static func flush(_ descriptor: Int32, path: String) throws {
        guard fsync(descriptor) == 0 || errno == EINVAL else {
            throw FileSystem.error("Cannot flush '\(path)'")
        }
    }

    /// Flushes and closes the file.
    func finish() throws {
        guard descriptor >= 0 else { return }
        defer { closeWithoutFlushing() }
        try flush()
    }

    /// Closes the file without flushing it: for a file flushed after its last write (on ext4
    /// an `fsync` of an unchanged file still asks the disk to empty its cache), or one that is
    /// being discarded.
    func closeWithoutFlushing() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    /// Closes and deletes the file (and its resume metadata), by name in its directory, and
    /// only while that name still holds this file.
    func discard() {
        closeWithoutFlushing()
        if FileSystem.Identity(at: name, in: directory.descriptor) == identity {
            _ = name.withCString { unlinkat(directory.descriptor, $0, 0) }
        }
        removeMetadata()
    }

    /// Where the checkpointed resume data of this partial lives.
    var metadataURL: URL { URL(fileURLWithPath: path + ".resume", isDirectory: false) }

    /// Whether resume data may lie beside the file: it was reopened to resume, or
    /// metadata was written (or will be, by a split download's recorder). A new file's
    /// name is new, so nothing lies beside it.
    var mayHaveMetadata = false

    /// Writes resume data describing flushed bytes: temp file, fsync, rename.
    func writeMetadata(_ resumeData: ResumeData) throws {
        mayHaveMetadata = true
        try FileSystem.writeAtomically(resumeData.encoded(), to: metadataURL)
    }

    /// Removes the resume data beside the file, by name in its directory, if there can be
    /// any.
    func removeMetadata() {
        guard mayHaveMetadata else { return }
        unlinkat(directory.descriptor, name + ".resume", 0)
    }

    /// This file as the source of a move: its held directory and name, and its identity,
    /// which the name must still have when it is moved.
    var moveSource: FileSystem.MoveSource {
        FileSystem.MoveSource(directory: directory, name: name, path: path, identity: identity)
    }
}
