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
