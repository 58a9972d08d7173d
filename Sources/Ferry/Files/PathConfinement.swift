package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether a path lies inside a set of directories once symbolic links are resolved: how
/// the background daemon keeps each task's files inside the directories it may use.
///
/// A path is judged as the file system has it now. A link can change afterwards (a
/// directory that did not exist yet when a task was added can appear as a link to
/// anywhere), so the daemon judges a task's paths when it is added and again when the
/// file is opened or moved into place.
package enum PathConfinement {
    /// Whether `file`'s directory, with links resolved as far as it exists, is one of
    /// `directories` (links resolved too) or lies inside one.
    package static func contains(_ directories: [URL], _ file: URL) -> Bool {
        contains(resolved: resolved(directories), file)
    }

    /// `directories` with links resolved as far as they exist: what
    /// ``contains(resolved:_:)`` compares with, for a caller that judges many files against
    /// the same directories (the daemon resolves its allowed directories once, at start; a
    /// link that appears or changes in one later can only make a file be refused).
    package static func resolved(_ directories: [URL]) -> [String] {
        directories.map { resolvedExistingPrefix($0).path }
    }

    /// Whether `file`'s directory, with links resolved as far as it exists, is one of
    /// `resolved` (from ``resolved(_:)``) or lies inside one.
    package static func contains(resolved: [String], _ file: URL) -> Bool {
        let directory = resolvedExistingPrefix(file.deletingLastPathComponent()).path
        return resolved.contains { allowed in
            directory == allowed || directory.hasPrefix(allowed == "/" ? "/" : allowed + "/")
        }
    }

    /// `directory` with symbolic links resolved as far as it exists; the missing rest is
    /// appended as written.
    package static func resolvedExistingPrefix(_ directory: URL) -> URL {
        var existing = directory.standardizedFileURL.path
        var missing: [String] = []
        // realpath(3): one walk in the C library, where Foundation's resolution stats and
        // rebuilds a URL per component (the daemon judges several paths per task).
        while true {
            if let resolved = realPath(existing) {
                var url = URL(fileURLWithPath: resolved, isDirectory: true)
                for component in missing { url.appendPathComponent(component) }
                return url
            }
            guard existing != "/", let slash = existing.lastIndex(of: "/") else { break }
            missing.insert(String(existing[existing.index(after: slash)...]), at: 0)
            existing = slash == existing.startIndex ? "/" : String(existing[..<slash])
        }
        var url = URL(fileURLWithPath: "/", isDirectory: true)
        for component in missing { url.appendPathComponent(component) }
        return url
    }

    /// `path` with every link resolved, or `nil` when some part of it does not exist (or is
    /// not a directory where one is needed).
    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
