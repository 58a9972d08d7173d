import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive claim on a destination file while a download runs, across tasks and
/// processes: `flock(2)` on a hidden lock file beside the destination
/// (`.NAME.ferry-lock`), removed when the claim is released.
///
/// A second download of the same destination fails at once with
/// ``FerryError/Reason/destinationInUse`` instead of racing the first one's partial file.
final class DestinationLock: Sendable {
    private let path: String
    private let descriptor: Int32

    /// Claims `destination`, or throws when another download holds it.
    ///
    /// - Parameter description: what the error names as busy (default: the destination).
    convenience init(destination: URL, description: String? = nil) throws {
        try self.init(destinationPath: FileSystem.path(destination), description: description)
    }

    /// Claims the file at `destination` (a file URL's path), or throws when another download
    /// holds it.
    ///
    /// - Parameter createDirectories: make the destination's missing directories (0755),
    ///   when the lock file cannot be made for want of them.
    init(destinationPath destination: String, description: String? = nil, createDirectories: Bool = false) throws {
        let (directory, name) = FileSystem.splitPath(destination)
        path = FileSystem.joinPath(directory, SafeFilename.sidecar(of: name, suffix: ".ferry-lock"))
        var mayCreate = createDirectories
        while true {
            let descriptor = path.withCString { open($0, O_CREAT | O_RDWR | O_CLOEXEC, 0o600) }
            guard descriptor >= 0 else {
                if errno == ENOENT && mayCreate {
                    try FileSystem.createDirectory(atPath: directory, mode: 0o755)
                    mayCreate = false
                    continue
                }
                throw FileSystem.error("Cannot lock '\(destination)'")
            }
            if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
                close(descriptor)
                throw FerryError(
                    .destinationInUse,
                    "\(description ?? "'\(destination)'") is being downloaded by another task or process."
                )
            }
            // The holder before us may have removed the file after we opened it: then our
            // lock is on a file nobody else will see. Try again with the current one.
            var opened = stat()
            var current = stat()
            if fstat(descriptor, &opened) == 0, path.withCString({ stat($0, &current) }) == 0,
                opened.st_ino == current.st_ino,
                opened.st_dev == current.st_dev
            {
                self.descriptor = descriptor
                return
            }
            close(descriptor)
        }
    }

    /// Releases the claim: the lock file is removed while still locked, then closed.
    func release() {
        _ = path.withCString { unlink($0) }
        close(descriptor)
    }
}
