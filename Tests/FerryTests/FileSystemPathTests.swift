import Foundation
import Testing

@testable import Ferry

/// The string path operations every download uses in place of `URL`'s: they must give what
/// Foundation gives, so that a device reached through `..` is still recognised as one.
@Suite("FileSystem paths")
struct FileSystemPathTests {
    /// Paths with every kind of segment, normalized as `standardizedFileURL` does.
    @Test(arguments: [
        "/", "/a", "/a/b", "/a/b/", "/a//b", "//a", "/a/./b", "/a/../b", "/a/b/..", "/a/b/.", "/..", "/../a",
        "/a/../../b", "/a/.hidden", "/a/...", "/a/..b", "/a/b../c", "/tmp/../dev/./null", "/dev/shm/../null",
        "/a/b c/ä", "/.", "/./a/",
    ])
    func aPathIsNormalizedAsFoundationDoes(_ path: String) {
        let url = URL(fileURLWithPath: path)
        #expect(FileSystem.lexicalPath(url) == url.standardizedFileURL.path)
    }

    @Test func aRelativeURLIsResolvedFirst() {
        let base = URL(fileURLWithPath: "/x/y/", isDirectory: true)
        let url = URL(fileURLWithPath: "../z/./f", relativeTo: base)
        #expect(FileSystem.lexicalPath(url) == "/x/z/f")
    }

    /// `FileSystem.path` gives what `URL.path` gives: trailing slashes off (but the root's),
    /// escapes decoded except `%2F`, a relative URL resolved against its base.
    @Test(arguments: [
        "file:///x/dir//", "file:///x//y/", "file:///", "file:////", "file:///x/%2F/", "file:///a/b/../c/",
        "file:///x/%2Fy", "file:///x/a%20b", "file:///x/%C3%A4", "file:///x?q#f", "file:///x;p/", "file://host/p",
        "http://h/p/", "file:",
    ])
    func aURLsPathIsWhatFoundationGives(_ string: String) throws {
        let url = try #require(URL(string: string))
        #expect(FileSystem.path(url) == url.path)
    }

    @Test func aFileURLsPathIsWhatFoundationGives() {
        let urls = [
            URL(fileURLWithPath: "/x/é ü/", isDirectory: true), URL(fileURLWithPath: "/x/100%"),
            URL(fileURLWithPath: "/x/q?a#b"), URL(fileURLWithPath: "relative/a b"),
            URL(fileURLWithPath: "/x/dir", isDirectory: true).appendingPathComponent("f"),
            URL(fileURLWithPath: "../d/", isDirectory: true, relativeTo: URL(fileURLWithPath: "/base/x/")),
        ]
        for url in urls { #expect(FileSystem.path(url) == url.path) }
    }

    @Test func relativePathsKeepTheirLeadingParents() {
        #expect(FileSystem.lexicallyNormalized("../a/./b/../c") == "../a/c")
        #expect(FileSystem.lexicallyNormalized("a/..") == ".")
        #expect(FileSystem.lexicallyNormalized("a/b") == "a/b")
    }

    @Test func splittingAndJoining() {
        #expect(FileSystem.splitPath("/a/b/c.bin") == ("/a/b", "c.bin"))
        #expect(FileSystem.splitPath("/c.bin") == ("/", "c.bin"))
        #expect(FileSystem.splitPath("c.bin") == (".", "c.bin"))
        #expect(FileSystem.joinPath("/", "c") == "/c")
        #expect(FileSystem.joinPath("/a", "c") == "/a/c")
        #expect(FileSystem.joinPath("/a/", "c") == "/a/c")
    }

    /// The default directory is recognised by its path, also once `TMPDIR`'s answer is
    /// remembered, and another directory is not.
    @Test func theDefaultPartialsDirectoryIsKnownByItsPath() {
        let path = FileSystem.defaultPartialsDirectory.path
        #expect(FileSystem.isDefaultPartialsDirectory(path))
        #expect(FileSystem.isDefaultPartialsDirectory(path))
        #expect(!FileSystem.isDefaultPartialsDirectory(path + "-other"))
    }
}
