import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `write(2)`, named so that methods called `write` can reach it.
private func posixWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}

/// A download's partial file in the session's downloads directory: created 0600, written
/// with large `write(2)` calls, flushed with `fsync(2)` before it is handed on.
///
/// Not thread-safe: one transfer owns it.
final class PartialFile {
    let url: URL
    private var descriptor: Int32
    private(set) var bytesWritten: Int64 = 0

    /// Creates a new, empty partial file in `directory` (created 0700 if missing).
    init(in directory: URL) throws {
        try FileSystem.createDirectory(directory, mode: 0o700)
        let name = ".ferry-\(UUID().uuidString.lowercased()).partial"
        url = directory.appendingPathComponent(name, isDirectory: false)
        descriptor = open(url.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw FileSystem.error("Cannot create a partial file in '\(directory.path)'")
        }
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Appends `buffer`, retrying short writes and interrupted calls.
    func write(_ buffer: ByteBuffer) throws {
        try buffer.withUnsafeReadableBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let result = posixWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw FileSystem.error("Cannot write '\(url.path)'")
                }
                offset += result
            }
        }
        bytesWritten += Int64(buffer.readableBytes)
    }

    /// Flushes data to stable storage and closes the file.
    func finish() throws {
        guard descriptor >= 0 else { return }
        defer {
            close(descriptor)
            descriptor = -1
        }
        guard fsync(descriptor) == 0 || errno == EINVAL else {
            throw FileSystem.error("Cannot flush '\(url.path)'")
        }
    }

    /// Closes and deletes the file.
    func discard() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        unlink(url.path)
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

    /// Moves a finished file to `destination` so that it appears there only complete.
    ///
    /// `rename(2)` when source and destination share a file system: one step, atomic, and it
    /// replaces an existing file only when `replace` is set. Across file systems the file is
    /// copied to a hidden temporary file beside the destination, flushed, and renamed into
    /// place; the source is removed last. The previous destination file is never removed
    /// before the new one is complete.
    static func moveFile(from source: URL, to destination: URL, createDirectories: Bool, replace: Bool) throws {
        let parent = destination.deletingLastPathComponent()
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
            var offset = 0
            while offset < count {
                let written = write(output, buffer + offset, count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw error("Cannot write '\(target.path)'")
                }
                offset += written
            }
        }
        guard fsync(output) == 0 else { throw error("Cannot flush '\(target.path)'") }
    }
}
