package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small file only its owner may read, for secrets such as the web interface's token.
package enum PrivateFile {
    /// Writes `data` to `file` whole: into a new file made 0600 from its first moment (no
    /// umask involved), then renamed over `file`, so no reader ever sees it partly written
    /// or with wider permissions.
    package static func write(_ data: Data, to file: URL) throws {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).\(getpid()).tmp")
        unlink(temporary.path)
        let descriptor = open(temporary.path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw failure("open", temporary) }
        var written = 0
        let result: Bool = data.withUnsafeBytes { bytes in
            fchmod(descriptor, 0o600)
            while written < bytes.count {
                let count = Glibc.write(descriptor, bytes.baseAddress! + written, bytes.count - written)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return false }
                written += count
            }
            return fsync(descriptor) == 0
        }
        close(descriptor)
        guard result, rename(temporary.path, file.path) == 0 else {
            let error = failure("write", file)
            unlink(temporary.path)
            throw error
        }
    }

    private static func failure(_ call: String, _ file: URL) -> any Error {
        NSError(
            domain: NSPOSIXErrorDomain,
            code: Int(errno),
            userInfo: [NSLocalizedDescriptionKey: "\(call) \(file.path): \(String(cString: strerror(errno)))"]
        )
    }
}
