package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small POSIX helpers with typed errors.
package enum FileSystem {
    /// `ferry-downloads-UID` in the temporary directory: one private directory per user,
    /// where partial files live unless the session names another
    /// (``SessionConfiguration/downloadsDirectory``).
    static var defaultPartialsDirectory: URL { defaultPartials().url }

    /// The default directory as last worked out, and the `TMPDIR` it was worked out for:
    /// every configuration starts with it and every download asks whether its directory is
    /// it, where working it out (Foundation's temporary directory, a URL and its path) cost
    /// a list of downloads about ten allocations per file.
    private static let lastDefaultPartials = Mutex<(temporary: String?, url: URL, path: String)?>(nil)

    /// ``defaultPartialsDirectory`` and its path, worked out again only when `TMPDIR` changed.
    static func defaultPartials() -> (url: URL, path: String) {
        let temporary = getenv("TMPDIR").map { String(cString: $0) }
        let known = lastDefaultPartials.withLock { last in
            last.flatMap { $0.temporary == temporary ? ($0.url, $0.path) : nil }
        }
        if let known { return known }
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "ferry-downloads-\(geteuid())",
            isDirectory: true
        )
        let worked = (url: url, path: url.path)
        lastDefaultPartials.withLock { $0 = (temporary, worked.url, worked.path) }
        return worked
    }

    /// Whether `path` is ``defaultPartialsDirectory``'s.
    static func isDefaultPartialsDirectory(_ path: String) -> Bool { defaultPartials().path == path }

    static func error(_ what: String, code: Int32 = errno) -> FerryError {
        FerryError(.fileSystem, "\(what): \(String(cString: strerror(code))).")
    }

    /// `mkdir -p` with `mode` for the directories it creates.
    static func createDirectory(_ url: URL, mode: mode_t) throws {
        try createDirectory(atPath: url.path, mode: mode)
    }

    /// `mkdir -p` of `path` with `mode` for the directories it creates; one `stat` when the
    /// directory is there.
    package static func createDirectory(atPath path: String, mode: mode_t) throws {
        var info = stat()
        if path.withCString({ stat($0, &info) }) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw FerryError(.fileSystem, "'\(path)' exists and is not a directory.")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: path,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: Int(mode)]
            )
        } catch {
            throw FerryError(.fileSystem, "Cannot create the directory '\(path)'.", underlying: error)
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
    static func openPartialsDirectory(_ directory: String, isDefault: Bool) throws -> Int32 {
        var checked = isDefault
        if !isDefault {
            var parent = stat()
            checked =
                splitPath(directory).directory.withCString { stat($0, &parent) } == 0 && parent.st_mode & S_IWOTH != 0
        }
        let flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (checked ? O_NOFOLLOW : 0)
        var held = directory.withCString { open($0, flags) }
        if held < 0 && errno == ENOENT {
            try createDirectory(atPath: directory, mode: 0o700)
            held = directory.withCString { open($0, flags) }
        }
        guard held >= 0 else {
            if checked && errno == ELOOP { throw notPrivate(directory) }
            if errno == ENOTDIR { throw FerryError(.fileSystem, "'\(directory)' exists and is not a directory.") }
            throw error("Cannot open the directory '\(directory)'")
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

    private static func notPrivate(_ directory: String) -> FerryError {
        FerryError(
            .fileSystem,
            "'\(directory)' is not a private directory of this user (another owner, a link, or open to others): partial downloads are kept only in one. Remove it, or choose another downloadsDirectory."
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
            guard name.withCString({ fstatat(directory, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
        }
    }

    /// A file to move: a name relative to a directory descriptor (`AT_FDCWD` for a path),
    /// and, when known, the identity the name must still have.
    struct MoveSource {
        /// The directory `name` is relative to, kept open while the move runs; `nil` for a
        /// path (``directory`` is then `AT_FDCWD`).
        private let held: HeldDirectory?
        var name: String
        /// For messages.
        var path: String
        var identity: Identity?

        /// The descriptor `name` is relative to.
        var directory: Int32 { held?.descriptor ?? AT_FDCWD }

        init(directory: HeldDirectory, name: String, path: String, identity: Identity?) {
            held = directory
            self.name = name
            self.path = path
            self.identity = identity
        }

        init(_ url: URL) {
            held = nil
            name = url.path
            path = url.path
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
        try moveFile(from: source, toPath: path(destination), createDirectories: createDirectories, replace: replace)
    }

    /// ``moveFile(from:to:createDirectories:replace:)`` to a file URL's path (`URL.path`).
    static func moveFile(from source: MoveSource, toPath target: String, createDirectories: Bool, replace: Bool) throws
    {
        // A device, FIFO or socket is never renamed over (that replaced /dev/null once), nor
        // a link to one. One `lstat` answers that and whether something is in the way.
        func notRegular() -> FerryError {
            FerryError(
                .fileSystem,
                "'\(target)' is not a regular file: a finished download replaces only regular files."
            )
        }
        if SequentialOutput.isSystemPath(lexicallyNormalized(target)) { throw notRegular() }
        var info = stat()
        if target.withCString({ lstat($0, &info) }) == 0 {
            switch info.st_mode & S_IFMT {
            case S_IFREG: break
            case S_IFDIR: throw FerryError(.fileSystem, "'\(target)' is a directory.")
            case S_IFLNK: if !SequentialOutput.isOrdinaryOrMissing(target) { throw notRegular() }
            default: throw notRegular()
            }
            if !replace { throw exists(target) }
        }
        if let identity = source.identity, Identity(at: source.name, in: source.directory) != identity {
            throw FerryError(
                .fileSystem,
                "'\(source.path)' no longer holds the downloaded file (it was replaced or removed): nothing was moved."
            )
        }
        // The partial file is private (0600) while it grows; the delivered file gets the
        // mode any new file of the user's would get.
        _ = source.name.withCString { fchmodat(source.directory, $0, userFileMode, 0) }
        // Missing directories are made when the move finds them missing (one `stat` fewer).
        if try place(source.directory, source.name, at: target, replace: replace, createDirectories: createDirectories)
        {
            return
        }
        let (parent, name) = splitPath(target)
        let staging = joinPath(
            parent,
            SafeFilename.sidecar(of: name, suffix: ".ferry-\(UUID().uuidString.prefix(8)).part")
        )
        do {
            try copyFile(from: source, to: staging)
            guard try place(AT_FDCWD, staging, at: target, replace: replace, createDirectories: false) else {
                throw error("Cannot move the download to '\(target)'", code: EXDEV)
            }
        } catch {
            unlink(staging)
            throw error
        }
        unlinkat(source.directory, source.name, 0)
    }

    /// Moves the file at a path (a file the daemon finished, a multipart body), as above.
    static func moveFile(from source: URL, to destination: URL, createDirectories: Bool, replace: Bool) throws {
        try moveFile(from: MoveSource(source), to: destination, createDirectories: createDirectories, replace: replace)
    }

    /// Puts `name` (in `directory`) at `destination` in one step; `false` when they are on
    /// different file systems. With `createDirectories`, the destination's missing
    /// directories are made and the step tried again.
    private static func place(
        _ directory: Int32,
        _ name: String,
        at destination: String,
        replace: Bool,
        createDirectories: Bool
    ) throws -> Bool {
        if replace {
            if renamed(name, in: directory, to: destination) { return true }
        } else {
            if linkat(directory, name, AT_FDCWD, destination, 0) == 0 {
                unlinkat(directory, name, 0)
                return true
            }
            if errno == EEXIST { throw exists(destination) }
            // A file system without hard links: check, then rename (a narrow race).
            if errno == EPERM || errno == EOPNOTSUPP || errno == EMLINK {
                var info = stat()
                if lstat(destination, &info) == 0 { throw exists(destination) }
                if renameat(directory, name, AT_FDCWD, destination) == 0 { return true }
            }
        }
        if errno == EXDEV { return false }
        if errno == ENOENT && createDirectories {
            try createDirectory(atPath: splitPath(destination).directory, mode: 0o755)
            return try place(directory, name, at: destination, replace: replace, createDirectories: false)
        }
        throw error("Cannot move the download to '\(destination)'")
    }

    private static func exists(_ destination: String) -> FerryError {
        FerryError(.destinationExists, "'\(destination)' already exists.")
    }

    /// `0666` less the process's umask, read without changing it (`umask(2)` would be a
    /// process-wide race); 0644 when it cannot be read.
    /// This boot of the machine (Linux's `/proc/sys/kernel/random/boot_id`), `nil` where
    /// there is none. Within one boot, bytes a process wrote to a file stay readable after
    /// the process dies however it dies (`kill -9` included): only a crash of the kernel
    /// or a power loss drops what was not flushed.
    static let bootID: String? = {
        guard let text = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8) else {
            return nil
        }
        let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return id.isEmpty ? nil : id
    }()

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
    static func removeIfPresent(_ url: URL) { _ = url.path.withCString { unlink($0) } }

    /// `renameat(2)` of `name` in `directory` to `destination`; whether it was done (`errno`
    /// says why not). The paths are passed with `withCString`, where Swift's implicit
    /// conversion of a `String` argument allocates a copy for each call.
    private static func renamed(_ name: String, in directory: Int32, to destination: String) -> Bool {
        name.withCString { name in destination.withCString { renameat(directory, name, AT_FDCWD, $0) } } == 0
    }

    /// Writes `data` to `url` so that a reader sees the old or the new content, never a mix:
    /// a temporary file beside it, made 0600 from its first moment, `fsync`, `rename`. The
    /// daemon keeps its web page's token this way too.
    package static func writeAtomically(_ data: Data, to url: URL) throws {
        let temporary = url.deletingLastPathComponent()
            .appendingPathComponent(
                SafeFilename.sidecar(of: url.lastPathComponent, suffix: ".\(UUID().uuidString.prefix(8)).tmp"),
                isDirectory: false
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

    private static func copyFile(from source: MoveSource, to target: String) throws {
        let input = openat(source.directory, source.name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard input >= 0 else { throw error("Cannot read '\(source.path)'") }
        defer { close(input) }
        if let identity = source.identity, Identity(descriptor: input) != identity {
            throw FerryError(.fileSystem, "'\(source.path)' no longer holds the downloaded file: nothing was moved.")
        }
        let output = open(target, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, userFileMode)
        guard output >= 0 else { throw error("Cannot create '\(target)'") }
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
                throw Self.error("Cannot write '\(target)'", code: error.code)
            }
        }
        guard fsync(output) == 0 else { throw error("Cannot flush '\(target)'") }
    }
}
