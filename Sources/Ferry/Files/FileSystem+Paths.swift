import Foundation

/// Paths as strings, for the steps every download takes (its lock, its checks, its move).
///
/// `URL`'s path operations (`standardizedFileURL`, `deletingLastPathComponent`,
/// `appendingPathComponent`) parse and rebuild the whole URL each time: with many small
/// files they were a tenth of a download's own work. These do the same on the path's bytes.
extension FileSystem {
    /// `url`'s absolute path with `.` and `..` segments and repeated slashes taken out, as
    /// `standardizedFileURL.path` gives it, without asking the file system. Most paths have
    /// none and are returned as they are.
    ///
    /// ```swift
    /// FileSystem.lexicalPath(URL(fileURLWithPath: "/tmp/../dev/./null"))   // "/dev/null"
    /// ```
    static func lexicalPath(_ url: URL) -> String {
        lexicallyNormalized(path(url))
    }

    /// `url.path`, worked out without rebuilding the URL when it can be.
    ///
    /// On Linux `URL.path` builds the absolute URL's string and parses it again; with many
    /// small files the one call a download made for its destination was a fiftieth of the
    /// process's CPU. Each step that turns a destination URL into a path (its lock, its
    /// move) calls this instead. The percent-encoded path of a URL with no base and no `%`
    /// in it is already the decoded one, and needs only `path`'s trailing slashes taken
    /// off; any other URL (one relative to a base, one whose path has an escape, such as
    /// `%2F`, which `path` keeps as it is) gets `url.path` itself.
    ///
    /// ```swift
    /// FileSystem.path(URL(fileURLWithPath: "/tmp/dir/", isDirectory: true))   // "/tmp/dir"
    /// ```
    static func path(_ url: URL) -> String {
        guard url.baseURL == nil else { return url.path }
        var path = url.path(percentEncoded: true)
        guard !path.utf8.contains(UInt8(ascii: "%")) else { return url.path }
        while path.utf8.count > 1, path.utf8.last == UInt8(ascii: "/") { path.removeLast() }
        return path
    }

    /// `path` with `.` and `..` segments, repeated slashes and a trailing slash taken out; a
    /// `..` above the root stays at the root, one at the start of a relative path is kept.
    static func lexicallyNormalized(_ path: String) -> String {
        guard needsNormalizing(path) else { return path }
        let absolute = path.utf8.first == UInt8(ascii: "/")
        var kept: [Substring] = []
        for segment in path.split(separator: "/", omittingEmptySubsequences: true) {
            switch segment {
            case ".":
                continue
            case "..":
                if let last = kept.last, last != ".." {
                    kept.removeLast()
                } else if !absolute {
                    kept.append(segment)
                }
            default:
                kept.append(segment)
            }
        }
        let joined = kept.joined(separator: "/")
        return absolute ? "/" + joined : (joined.isEmpty ? "." : joined)
    }

    /// Whether `path` has a `.` or `..` segment, an empty one (`//`), or a trailing slash.
    private static func needsNormalizing(_ path: String) -> Bool {
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        // The length of the segment so far, and whether it is all dots.
        var length = 0
        var onlyDots = true
        var index = 0
        for byte in path.utf8 {
            if byte == slash {
                if index > 0 && (length == 0 || (onlyDots && length <= 2)) { return true }
                length = 0
                onlyDots = true
            } else {
                length += 1
                onlyDots = onlyDots && byte == dot
            }
            index += 1
        }
        if index > 1 && length == 0 { return true }
        return onlyDots && length > 0 && length <= 2
    }

    /// The directory part of `path` (everything before its last slash; `/` for a name at
    /// the root, `.` for a bare name) and its last component.
    static func splitPath(_ path: String) -> (directory: String, name: String) {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return (".", path) }
        let name = String(path[path.index(after: slash)...])
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        return (directory, name)
    }

    /// `name` in `directory`, one slash between them.
    static func joinPath(_ directory: String, _ name: String) -> String {
        directory.utf8.last == UInt8(ascii: "/") ? directory + name : directory + "/" + name
    }
}
