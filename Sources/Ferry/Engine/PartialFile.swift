import Foundation
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
/// Not thread-safe: one transfer owns it.
final class PartialFile {
    let url: URL
    private var descriptor: Int32
    /// Bytes from the start of the file that this download has written or kept.
    private(set) var length: Int64 = 0

    /// Creates a new, empty partial file in `directory` (created 0700 if missing; see
    /// ``FileSystem/preparePartialsDirectory(_:isDefault:)``).
    init(in directory: URL) throws {
        try FileSystem.preparePartialsDirectory(
            directory,
            isDefault: directory == SessionConfiguration.defaultDownloadsDirectory
        )
        let name = ".ferry-\(UUID().uuidString.lowercased()).partial"
        url = directory.appendingPathComponent(name, isDirectory: false)
        descriptor = open(url.path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw FileSystem.error("Cannot create a partial file in '\(directory.path)'")
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

    /// Removes a partial file named by resume data, if it is one of Ferry's.
    static func removeNamed(_ url: URL) {
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
        descriptor = open(url.path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG,
            info.st_uid == geteuid(), Int64(info.st_size) >= keep, ftruncate(descriptor, off_t(keep)) == 0
        else {
            if descriptor >= 0 { close(descriptor) }
            return nil
        }
        length = keep
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

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

    /// Closes and deletes the file (and its resume metadata).
    func discard() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        unlink(url.path)
        unlink(metadataURL.path)
    }

    /// Where the checkpointed resume data of this partial lives.
    var metadataURL: URL { url.appendingPathExtension("resume") }

    /// Writes resume data describing flushed bytes: temp file, fsync, rename.
    func writeMetadata(_ resumeData: ResumeData) throws {
        try FileSystem.writeAtomically(resumeData.encoded(), to: metadataURL)
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

    /// Creates `directory` for partial files (0700) if missing, and refuses one that another
    /// user could have prepared.
    ///
    /// The default directory (`ferry-downloads-UID` in the temporary directory) must be this
    /// user's own, a real directory (not a link), with no access for group or others. A
    /// directory the caller chose is checked only where everyone may create files (its
    /// parent is writable by all, as `/tmp`): there it must be this user's, not a link, and
    /// not writable by group or others.
    static func preparePartialsDirectory(_ directory: URL, isDefault: Bool) throws {
        try createDirectory(directory, mode: 0o700)
        var parent = stat()
        let sharedParent =
            stat(directory.deletingLastPathComponent().path, &parent) == 0 && parent.st_mode & S_IWOTH != 0
        guard isDefault || sharedParent else { return }
        var info = stat()
        let forbidden: mode_t = isDefault ? 0o077 : 0o022
        guard lstat(directory.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == geteuid(),
            info.st_mode & forbidden == 0
        else {
            throw FerryError(
                .fileSystem,
                "'\(directory.path)' is not a private directory of this user (another owner, a link, or open to others): partial downloads are kept only in one. Remove it, or choose another downloadsDirectory."
            )
        }
    }

    /// Moves a finished file to `destination` so that it appears there only complete.
    ///
    /// `rename(2)` when source and destination share a file system: one step, atomic, and it
    /// replaces an existing file only when `replace` is set. Across file systems the file is
    /// copied to a hidden temporary file beside the destination, flushed, and renamed into
    /// place; the source is removed last. The previous destination file is never removed
    /// before the new one is complete.
    static func moveFile(from source: URL, to destination: URL, createDirectories: Bool, replace: Bool) throws {
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
            if !replace {
                throw FerryError(.fileSystem, "'\(destination.path)' already exists.")
            }
        }
        // The partial file is private (0600) while it grows; the delivered file gets the
        // mode any new file of the user's would get.
        chmod(source.path, userFileMode)
        if rename(source.path, destination.path) == 0 { return }
        guard errno == EXDEV else { throw error("Cannot move the download to '\(destination.path)'") }
        let staging = parent.appendingPathComponent(
            ".\(destination.lastPathComponent).ferry-\(UUID().uuidString.prefix(8)).part"
        )
        do {
            try copyFile(from: source, to: staging)
            if !replace, lstat(destination.path, &info) == 0 {
                throw FerryError(.fileSystem, "'\(destination.path)' already exists.")
            }
            guard rename(staging.path, destination.path) == 0 else {
                throw error("Cannot move the download to '\(destination.path)'")
            }
        } catch {
            unlink(staging.path)
            throw error
        }
        unlink(source.path)
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
            .appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString.prefix(8)).tmp")
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

    private static func copyFile(from source: URL, to target: URL) throws {
        let input = open(source.path, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw error("Cannot read '\(source.path)'") }
        defer { close(input) }
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
