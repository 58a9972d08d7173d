package import Foundation
import NIOCore

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
    private var descriptor: Int32
    /// The directory the file lives in, opened when it was verified.
    private let directory: Int32
    /// The file's device and inode, to recognise it by name again.
    private let identity: FileSystem.Identity
    /// Bytes from the start of the file that this download has written or kept.
    private(set) var length: Int64 = 0

    /// Creates a new, empty partial file in `directory` (created 0700 if missing; see
    /// ``FileSystem/openPartialsDirectory(_:isDefault:)``).
    convenience init(in directory: URL) throws {
        let held = try FileSystem.openPartialsDirectory(
            directory,
            isDefault: directory == SessionConfiguration.defaultDownloadsDirectory
        )
        try self.init(creatingIn: held, path: directory)
    }

    /// Creates a new, empty partial file in the directory `other` lives in: the decoded
    /// body of a coded download.
    convenience init(beside other: PartialFile) throws {
        let held = fcntl(other.directory, F_DUPFD_CLOEXEC, 0)
        guard held >= 0 else { throw FileSystem.error("Cannot create a partial file beside '\(other.url.path)'") }
        try self.init(creatingIn: held, path: other.url.deletingLastPathComponent())
    }

    /// Takes ownership of `held`, an open directory, and creates the file in it.
    private init(creatingIn held: Int32, path: URL) throws {
        let name = ".ferry-\(UUID().uuidString.lowercased()).partial"
        url = path.appendingPathComponent(name, isDirectory: false)
        directory = held
        descriptor = openat(held, name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0, let identity = FileSystem.Identity(descriptor: descriptor) else {
            let failure = FileSystem.error("Cannot create a partial file in '\(path.path)'")
            if descriptor >= 0 { close(descriptor) }
            close(held)
            throw failure
        }
        self.identity = identity
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
    /// them were never recorded as flushed and are cut off). `nil` when the file is missing,
    /// shorter than `keep`, not a regular file of this user's, or not named as Ferry names
    /// partial files: the download must start over.
    init?(resuming url: URL, keep: Int64) {
        self.url = url
        guard Self.isPartialFileName(url) else { return nil }
        directory = open(url.deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { return nil }
        descriptor = openat(directory, url.lastPathComponent, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            info.st_uid == geteuid(), Int64(info.st_size) >= keep, ftruncate(descriptor, off_t(keep)) == 0,
            let identity = FileSystem.Identity(descriptor: descriptor)
        else {
            if descriptor >= 0 { close(descriptor) }
            close(directory)
            return nil
        }
        self.identity = identity
        length = keep
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
        close(directory)
    }

    /// Writes `bytes` at `offset`, retrying short writes and interrupted calls.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        var done = 0
        while done < bytes.count {
            let result = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if result < 0 {
                if errno == EINTR { continue }
                throw FileSystem.error("Cannot write '\(url.path)'")
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
            if errno != EINTR { throw FileSystem.error("Cannot read '\(url.path)'") }
        }
    }

    /// Cuts the file to `size` bytes (0 to start over).
    func truncate(to size: Int64) throws {
        guard ftruncate(descriptor, off_t(size)) == 0 else { throw FileSystem.error("Cannot truncate '\(url.path)'") }
        length = size
    }

    /// Flushes written data to stable storage.
    func flush() throws {
        guard descriptor >= 0 else { return }
        guard fsync(descriptor) == 0 || errno == EINVAL else {
            throw FileSystem.error("Cannot flush '\(url.path)'")
        }
    }

    /// Flushes and closes the file.
    func finish() throws {
        guard descriptor >= 0 else { return }
        defer {
            close(descriptor)
            descriptor = -1
        }
        try flush()
    }

    /// Closes and deletes the file (and its resume metadata), by name in its directory, and
    /// only while that name still holds this file.
    func discard() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        let name = url.lastPathComponent
        if FileSystem.Identity(at: name, in: directory) == identity { unlinkat(directory, name, 0) }
        unlinkat(directory, metadataURL.lastPathComponent, 0)
    }

    /// Where the checkpointed resume data of this partial lives.
    var metadataURL: URL { url.appendingPathExtension("resume") }

    /// Writes resume data describing flushed bytes: temp file, fsync, rename.
    func writeMetadata(_ resumeData: ResumeData) throws {
        try FileSystem.writeAtomically(resumeData.encoded(), to: metadataURL)
    }

    /// This file as the source of a move: its held directory and name, and its identity,
    /// which the name must still have when it is moved.
    var moveSource: FileSystem.MoveSource {
        FileSystem.MoveSource(directory: directory, name: url.lastPathComponent, path: url.path, identity: identity)
    }
}

/// Small POSIX helpers with typed errors.
enum FileSystem {
    static func error(_ what: String, code: Int32 = errno) -> FerryError {
        FerryError(.fileSystem, "\(what): \(String(cString: strerror(code))).")
    }

    /// `mkdir -p` with `mode` for the directories it creates.
    static func createDirectory(_ url: URL, mode: mode_t) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw FerryError(.fileSystem, "'\(url.path)' exists and is not a directory.")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                at: url,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: Int(mode)]
            )
        } catch {
            throw FerryError(.fileSystem, "Cannot create the directory '\(url.path)'.", underlying: error)
        }
    }

    /// Creates `directory` for partial files (0700) if missing, opens it, and refuses one
    /// that another user could have prepared. Returns the open directory: the checks are
    /// made on it (`fstat`), so the directory used is the directory checked.
    ///
    /// The default directory (`ferry-downloads-UID` in the temporary directory) must be this
    /// user's own, a real directory (not a link), with no access for group or others. A
    /// directory the caller chose is checked only where everyone may create files (its
    /// parent is writable by all, as `/tmp`): there it must be this user's, not a link, and
    /// not writable by group or others.
    static func openPartialsDirectory(_ directory: URL, isDefault: Bool) throws -> Int32 {
        try createDirectory(directory, mode: 0o700)
        var parent = stat()
        let sharedParent =
            stat(directory.deletingLastPathComponent().path, &parent) == 0 && parent.st_mode & S_IWOTH != 0
        let checked = isDefault || sharedParent
        let held = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (checked ? O_NOFOLLOW : 0))
        guard held >= 0 else {
            if checked && errno == ELOOP { throw notPrivate(directory) }
            throw error("Cannot open the directory '\(directory.path)'")
        }
        guard checked else { return held }
        var info = stat()
        let forbidden: mode_t = isDefault ? 0o077 : 0o022
        guard fstat(held, &info) == 0, info.st_uid == geteuid(), info.st_mode & forbidden == 0 else {
            close(held)
            throw notPrivate(directory)
        }
        return held
    }

    private static func notPrivate(_ directory: URL) -> FerryError {
        FerryError(
            .fileSystem,
            "'\(directory.path)' is not a private directory of this user (another owner, a link, or open to others): partial downloads are kept only in one. Remove it, or choose another downloadsDirectory."
        )
    }

    /// A file's device and inode: which file a name holds.
    struct Identity: Equatable {
        var device: UInt64
        var inode: UInt64

        init?(descriptor: Int32) {
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }

        /// The identity of what `name` in `directory` holds now (a link is not followed).
        init?(at name: String, in directory: Int32) {
            var info = stat()
            guard fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// A file to move: a name relative to a directory descriptor (`AT_FDCWD` for a path),
    /// and, when known, the identity the name must still have.
    struct MoveSource {
        var directory: Int32
        var name: String
        /// For messages.
        var path: String
        var identity: Identity?

        init(directory: Int32, name: String, path: String, identity: Identity?) {
            self.directory = directory
            self.name = name
            self.path = path
            self.identity = identity
        }

        init(_ url: URL) {
            self.init(directory: AT_FDCWD, name: url.path, path: url.path, identity: nil)
        }
    }

    /// Moves a finished file to `destination` so that it appears there only complete.
    ///
    /// One step on one file system: `rename(2)` (relative to the source's directory
    /// descriptor) when an existing file may be replaced, else `link(2)` then removing the
    /// source, which fails rather than replace a file that appeared meanwhile. Across file
    /// systems the file is copied to a hidden temporary file beside the destination,
    /// flushed, and moved into place the same way; the source is removed last. The previous
    /// destination file is never removed before the new one is complete. A source whose
    /// name no longer holds the file it should (`source.identity`) is not moved.
    static func moveFile(from source: MoveSource, to destination: URL, createDirectories: Bool, replace: Bool) throws {
        let parent = destination.deletingLastPathComponent()
        // A device, FIFO or socket is never renamed over (that replaced /dev/null once).
        if SequentialOutput.isSequential(destination) {
            throw FerryError(
                .fileSystem,
                "'\(destination.path)' is not a regular file: a finished download replaces only regular files."
            )
        }
        if createDirectories { try createDirectory(parent, mode: 0o755) }
        var info = stat()
        if lstat(destination.path, &info) == 0 {
            if (info.st_mode & S_IFMT) == S_IFDIR {
                throw FerryError(.fileSystem, "'\(destination.path)' is a directory.")
            }
            if !replace { throw exists(destination) }
        }
        if let identity = source.identity, Identity(at: source.name, in: source.directory) != identity {
            throw FerryError(
                .fileSystem,
                "'\(source.path)' no longer holds the downloaded file (it was replaced or removed): nothing was moved."
            )
        }
        // The partial file is private (0600) while it grows; the delivered file gets the
        // mode any new file of the user's would get.
        fchmodat(source.directory, source.name, userFileMode, 0)
        if try place(source.directory, source.name, at: destination, replace: replace) { return }
        let staging = parent.appendingPathComponent(
            SafeFilename.sidecar(
                of: destination.lastPathComponent,
                suffix: ".ferry-\(UUID().uuidString.prefix(8)).part"
            )
        )
        do {
            try copyFile(from: source, to: staging)
            guard try place(AT_FDCWD, staging.path, at: destination, replace: replace) else {
                throw error("Cannot move the download to '\(destination.path)'", code: EXDEV)
            }
        } catch {
            unlink(staging.path)
            throw error
        }
        unlinkat(source.directory, source.name, 0)
    }

    /// Moves the file at a path (a file the daemon finished, a multipart body), as above.
    static func moveFile(from source: URL, to destination: URL, createDirectories: Bool, replace: Bool) throws {
        try moveFile(from: MoveSource(source), to: destination, createDirectories: createDirectories, replace: replace)
    }

    /// Puts `name` (in `directory`) at `destination` in one step; `false` when they are on
    /// different file systems.
    private static func place(_ directory: Int32, _ name: String, at destination: URL, replace: Bool) throws -> Bool {
        if replace {
            if renameat(directory, name, AT_FDCWD, destination.path) == 0 { return true }
        } else {
            if linkat(directory, name, AT_FDCWD, destination.path, 0) == 0 {
                unlinkat(directory, name, 0)
                return true
            }
            if errno == EEXIST { throw exists(destination) }
            // A file system without hard links: check, then rename (a narrow race).
            if errno == EPERM || errno == EOPNOTSUPP || errno == EMLINK {
                var info = stat()
                if lstat(destination.path, &info) == 0 { throw exists(destination) }
                if renameat(directory, name, AT_FDCWD, destination.path) == 0 { return true }
            }
        }
        if errno == EXDEV { return false }
        throw error("Cannot move the download to '\(destination.path)'")
    }

    private static func exists(_ destination: URL) -> FerryError {
        FerryError(.destinationExists, "'\(destination.path)' already exists.")
    }

    /// `0666` less the process's umask, read without changing it (`umask(2)` would be a
    /// process-wide race); 0644 when it cannot be read.
    static let userFileMode: mode_t = {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        for line in status.split(separator: "\n") where line.hasPrefix("Umask:") {
            if let mask = mode_t(line.dropFirst("Umask:".count).trimmingCharacters(in: .whitespaces), radix: 8) {
                return 0o666 & ~mask
            }
        }
        return 0o644
    }()

    /// Flushes a directory's entries (a removal or rename in it) to stable storage.
    static func syncDirectory(_ url: URL) {
        let descriptor = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        fsync(descriptor)
        close(descriptor)
    }

    /// Removes a file if it exists.
    static func removeIfPresent(_ url: URL) { unlink(url.path) }

    /// Writes `data` to `url` so that a reader sees the old or the new content, never a mix:
    /// a temporary file beside it, `fsync`, `rename`.
    static func writeAtomically(_ data: Data, to url: URL) throws {
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(
                SafeFilename.sidecar(of: url.lastPathComponent, suffix: ".\(UUID().uuidString.prefix(8)).tmp")
            )
        let descriptor = open(temporary.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw error("Cannot write '\(temporary.path)'") }
        do {
            defer { close(descriptor) }
            do {
                try data.withUnsafeBytes { try writeAll(descriptor, $0) }
            } catch let failure as CallError {
                throw Self.error("Cannot write '\(temporary.path)'", code: failure.code)
            }
            guard fsync(descriptor) == 0 else { throw error("Cannot flush '\(temporary.path)'") }
            guard rename(temporary.path, url.path) == 0 else { throw error("Cannot write '\(url.path)'") }
        } catch {
            unlink(temporary.path)
            throw error
        }
    }

    private static func copyFile(from source: MoveSource, to target: URL) throws {
        let input = openat(source.directory, source.name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard input >= 0 else { throw error("Cannot read '\(source.path)'") }
        defer { close(input) }
        if let identity = source.identity, Identity(descriptor: input) != identity {
            throw FerryError(.fileSystem, "'\(source.path)' no longer holds the downloaded file: nothing was moved.")
        }
        let output = open(target.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, userFileMode)
        guard output >= 0 else { throw error("Cannot create '\(target.path)'") }
        defer { close(output) }
        let size = 1 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(input, buffer, size)
            if count < 0 {
                if errno == EINTR { continue }
                throw error("Cannot read '\(source.path)'")
            }
            if count == 0 { break }
            do {
                try writeAll(output, UnsafeRawBufferPointer(start: buffer, count: count))
            } catch {
                throw Self.error("Cannot write '\(target.path)'", code: error.code)
            }
        }
        guard fsync(output) == 0 else { throw error("Cannot flush '\(target.path)'") }
    }
}
