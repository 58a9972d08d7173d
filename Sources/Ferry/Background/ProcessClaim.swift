package import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive claim across processes, held until ``release()`` or until the process ends
/// however it ends: `flock(2)` on a lock file, which the kernel drops at exit (`kill -9`
/// included). One daemon per state directory, one attached process per background session.
package final class ProcessClaim: Sendable {
    private let descriptor: Mutex<Int32?>

    /// Claims `file` (created 0600 if missing), or returns `nil` when someone holds it.
    package init?(file: URL) throws(FerryError) {
        let descriptor = open(file.path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileSystem.error("Cannot open '\(file.path)'") }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            Self.close(descriptor)
            return nil
        }
        self.descriptor = Mutex(descriptor)
    }

    /// Writes `text` as the lock file's whole content, for others to read while the claim is
    /// held (``holder(of:)``): who holds it.
    package func record(_ text: String) throws(FerryError) {
        let written: Bool = descriptor.withLock { descriptor in
            guard let descriptor, ftruncate(descriptor, 0) == 0 else { return false }
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) } == bytes.count
        }
        guard written else { throw FileSystem.error("Cannot record the holder of a lock") }
    }

    /// What the holder of `file`'s claim recorded (``record(_:)``; empty before it did), or
    /// `nil` when nobody holds it (or the file cannot be read).
    package static func holder(of file: URL) -> String? {
        let descriptor = file.path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        // A shared lock taken at once means no exclusive one is held.
        if flock(descriptor, LOCK_SH | LOCK_NB) == 0 {
            _ = flock(descriptor, LOCK_UN)
            return nil
        }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        return String(decoding: bytes.prefix(max(0, count)), as: UTF8.self)
    }

    /// Lets the claim go (at once; later calls do nothing).
    package func release() {
        if let descriptor = descriptor.withLock({ $0.take() }) { Self.close(descriptor) }
    }

    deinit { release() }

    private static func close(_ descriptor: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(descriptor)
        #elseif canImport(Darwin)
        _ = Darwin.close(descriptor)
        #endif
    }
}
