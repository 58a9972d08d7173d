import Ferry
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The one folder under the system's temporary directory that holds every directory this
/// test process makes, removed when the process exits.
///
/// A run of the suite writes gigabytes (gibibyte downloads, segmented files, daemon state).
/// Left behind run after run, they once filled the disk of a CI machine, and the next run
/// failed on "No space left on device" in tests that had nothing wrong. So the process
/// removes its folder at exit, and the first call also removes the folders of earlier runs
/// whose process is gone (killed, or stopped in a debugger), which never reached their exit,
/// when they are this user's.
///
/// The folder is `ferry-tests-PID` under `TMPDIR` (or `/tmp`).
enum TestScratch {
    private static let prefix = "ferry-tests-"

    private static let made: Result<URL, any Error> = Result {
        let base = FileManager.default.temporaryDirectory
        EndedProcessLeftovers.remove(in: base, prefix: prefix, tagLength: 0)
        let root = base.appendingPathComponent("\(prefix)\(getpid())", isDirectory: true)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        atexit {
            if case .success(let root) = TestScratch.made { try? FileManager.default.removeItem(at: root) }
        }
        return root
    }

    /// This process's scratch folder, made (and registered for removal at exit) on first use.
    static func root() throws -> URL { try made.get() }
}
