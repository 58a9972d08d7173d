package import Foundation

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
        let directory = resolvedExistingPrefix(file.deletingLastPathComponent()).path
        return directories.map { resolvedExistingPrefix($0).path }.contains { allowed in
            directory == allowed || directory.hasPrefix(allowed == "/" ? "/" : allowed + "/")
        }
    }

    /// `directory` with symbolic links resolved as far as it exists; the missing rest is
    /// appended as written.
    package static func resolvedExistingPrefix(_ directory: URL) -> URL {
        var existing = directory.standardizedFileURL
        var missing: [String] = []
        while !FileManager.default.fileExists(atPath: existing.path), existing.path != "/" {
            missing.insert(existing.lastPathComponent, at: 0)
            existing = existing.deletingLastPathComponent()
        }
        var resolved = existing.resolvingSymlinksInPath()
        for component in missing { resolved.appendPathComponent(component) }
        return resolved
    }
}
