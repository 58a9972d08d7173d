import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A download destination that is written in order and never replaced: standard output, a
/// pipe, a device, a FIFO.
///
/// A download normally grows a partial file and renames it over its destination. Done to
/// `/dev/null` that replaces the machine's device node with a regular file; done to a FIFO
/// it replaces the FIFO. Such destinations are opened as they are (never created or
/// truncated) and written from the first byte to the last.
///
/// Not thread-safe: one transfer owns it.
final class SequentialOutput {
    /// What the task reports as its file: the path, or `/dev/fd/N`.
    let url: URL
    private let descriptor: Int32
    private let ownsDescriptor: Bool
    /// Bytes written so far.
    private(set) var written: Int64 = 0

    /// How messages name it: "standard output", or its path.
    var name: String { url.path == "/dev/fd/\(STDOUT_FILENO)" ? "standard output" : url.path }

    /// The sequential output for `destination`, or `nil` when it is an ordinary file
    /// destination (partial file, then rename).
    ///
    /// - Throws: ``FerryError/Reason/fileSystem`` when the path is one that must be written
    ///   in order but cannot be opened (a socket, a missing path under `/dev`).
    static func make(for destination: DownloadDestination) throws -> SequentialOutput? {
        if let handle = destination.handle, let url = destination.fixedURL {
            return SequentialOutput(url: url, descriptor: handle.fileDescriptor, owns: false)
        }
        guard let url = destination.fixedURL, let path = destination.fixedPath, isSequential(path: path) else {
            return nil
        }
        // The process's own descriptors are written as they are, at their offset (a shell's
        // `>>` appends), not opened again from the start.
        if let inherited = inheritedDescriptor(url) {
            return SequentialOutput(url: url, descriptor: inherited, owns: false)
        }
        let descriptor = open(url.path, O_WRONLY | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            if errno == ENOENT {
                throw FerryError(
                    .fileSystem,
                    "'\(url.path)' does not exist, and Ferry never creates files under /dev or /proc."
                )
            }
            throw FileSystem.error("Cannot open '\(url.path)' for writing")
        }
        return SequentialOutput(url: url, descriptor: descriptor, owns: true)
    }

    /// Whether `url` must be written in order rather than replaced: anything under `/dev` or
    /// `/proc` (devices, `/dev/stdout`, `/proc/self/fd/N`) but `/dev/shm`, and any existing
    /// path that is neither a regular file nor a directory once links are followed.
    ///
    /// `/dev/shm` is the exception because it is not devices: it is a tmpfs mounted for
    /// ordinary files (POSIX shared memory, and a common place for scratch files in RAM),
    /// where a download is written and moved into place like anywhere else.
    static func isSequential(_ url: URL) -> Bool {
        isSequential(path: url.path)
    }

    /// ``isSequential(_:)`` for a file URL's absolute path (`URL.path`).
    static func isSequential(path given: String) -> Bool {
        let path = FileSystem.lexicallyNormalized(given)
        return isSystemPath(path) || !isOrdinaryOrMissing(path)
    }

    /// Whether a normalized path lies under `/dev` (but `/dev/shm/`) or `/proc`: written in
    /// order whatever is there.
    static func isSystemPath(_ path: String) -> Bool {
        if path.hasPrefix("/dev/shm/") { return false }
        for system in ["/dev", "/proc"] where path == system || path.hasPrefix(system + "/") { return true }
        return false
    }

    /// Whether `path` does not exist, or is a regular file or a directory once links are
    /// followed.
    static func isOrdinaryOrMissing(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return true }
        let type = info.st_mode & S_IFMT
        return type == S_IFREG || type == S_IFDIR
    }

    /// The descriptor `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` or `/proc/self/fd/N` names,
    /// if it is open.
    private static func inheritedDescriptor(_ url: URL) -> Int32? {
        let path = FileSystem.lexicalPath(url)
        let descriptor: Int32?
        switch path {
        case "/dev/stdout": descriptor = STDOUT_FILENO
        case "/dev/stderr": descriptor = STDERR_FILENO
        default:
            let prefixes = ["/dev/fd/", "/proc/self/fd/"]
            descriptor = prefixes.first(where: path.hasPrefix).flatMap { Int32(path.dropFirst($0.count)) }
        }
        guard let descriptor, fcntl(descriptor, F_GETFD) >= 0 else { return nil }
        return descriptor
    }

    private init(url: URL, descriptor: Int32, owns: Bool) {
        self.url = url
        self.descriptor = descriptor
        self.ownsDescriptor = owns
    }

    deinit { if ownsDescriptor { close(descriptor) } }

    /// Writes all of `bytes`, waiting while a non-blocking output is full.
    func write(_ bytes: UnsafeRawBufferPointer) throws {
        do {
            try FileSystem.writeAll(descriptor, bytes)
        } catch {
            if error.code == EPIPE {
                throw FerryError(.fileSystem, "Cannot write to \(name): its reader has gone (broken pipe).")
            }
            throw FileSystem.error("Cannot write to \(name)", code: error.code)
        }
        written += Int64(bytes.count)
    }
}

extension FileSystem {
    /// A system call's failure: its `errno`.
    struct CallError: Error {
        let code: Int32
    }

    /// Writes all of `bytes` to `descriptor`: retries interrupted calls and short writes, and
    /// waits (with `poll`) while a non-blocking descriptor is full.
    ///
    /// - Throws: the `errno` of the write that failed.
    static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(CallError) {
        guard let base = bytes.baseAddress else { return }
        var done = 0
        while done < bytes.count {
            let result = write(descriptor, base + done, bytes.count - done)
            if result >= 0 {
                done += result
                continue
            }
            switch errno {
            case EINTR:
                continue
            case EAGAIN:
                var wait = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                _ = poll(&wait, 1, -1)
            default:
                throw CallError(code: errno)
            }
        }
    }
}
