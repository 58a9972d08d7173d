package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Removes the directories that processes of this user left in a temporary directory and
/// never removed because they ended first (an `exit`, a crash, `kill -9`).
///
/// A directory qualifies only when all of these hold:
/// - its name is `PREFIX` followed by a process id, then, when `tagLength` is not zero, a
///   `-` and exactly `tagLength` characters (a random tag);
/// - the process id is not this process's, and `kill(pid, 0)` says no such process exists;
/// - it is a directory (not a link) owned by this process's effective user.
///
/// Anything else, including another user's directory and names of an older form, is left
/// alone. Errors are ignored: what cannot be read or removed stays, and the caller goes on.
///
/// ```swift
/// EndedProcessLeftovers.remove(in: FileManager.default.temporaryDirectory, prefix: "ferry-tls-", tagLength: 8)
/// ```
package enum EndedProcessLeftovers {
    /// Scans `base` once and removes the qualifying directories (see the type's discussion).
    ///
    /// - Parameters:
    ///   - base: The folder to scan, usually `TMPDIR`.
    ///   - prefix: The start every candidate's name has, such as `ferry-tls-`.
    ///   - tagLength: The length of the random tag after `PID-`, or 0 when the name ends at the PID.
    package static func remove(in base: URL, prefix: String, tagLength: Int) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: base.path)) ?? []
        for name in names where name.hasPrefix(prefix) {
            guard let pid = processID(in: name.dropFirst(prefix.count), tagLength: tagLength), pid != getpid()
            else { continue }
            let path = base.appendingPathComponent(name).path
            var info = stat()
            guard lstat(path, &info) == 0, info.st_uid == geteuid(), info.st_mode & S_IFMT == S_IFDIR else {
                continue
            }
            // kill(pid, 0) fails with ESRCH only when no such process exists.
            guard kill(pid, 0) == -1, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(atPath: path)
        }
    }

    /// The process id in `rest` (a name without its prefix), or nil when `rest` does not have
    /// the expected form.
    static func processID(in rest: Substring, tagLength: Int) -> pid_t? {
        var digits = rest
        if tagLength > 0 {
            let fields = rest.split(separator: "-", omittingEmptySubsequences: false)
            guard fields.count == 2, fields[1].count == tagLength else { return nil }
            digits = fields[0]
        }
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
            let pid = pid_t(digits), pid > 0
        else { return nil }
        return pid
    }
}
