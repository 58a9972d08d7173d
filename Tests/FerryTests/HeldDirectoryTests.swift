import Foundation
import Testing

@testable import Ferry

#if canImport(Glibc)
import Glibc
#endif

/// A partials directory held open between files: shared while it stands, opened (and made)
/// again once a cleaner removed it. Real directories, in the test's own temporary directory.
@Suite("HeldDirectorySlot")
struct HeldDirectoryTests {
    /// Runs `body` with a new slot and a scratch directory of its own, removed afterwards.
    private func withSlot(_ body: (HeldDirectorySlot, URL) throws -> Void) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("held-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try body(HeldDirectorySlot(), root)
    }

    @Test func filesOfOnePathShareOneOpenDirectory() throws {
        try withSlot { slot, root in
            let path = root.appendingPathComponent("partials").path
            let first = try slot.partials(path)
            #expect(try slot.partials(path) === first)
            #expect(FileManager.default.fileExists(atPath: path), "the directory is made when missing")
            // Another path (TMPDIR changed) is another directory, held in its place.
            let other = try slot.partials(path + "-other")
            #expect(other !== first)
            #expect(try slot.partials(path + "-other") === other)
        }
    }

    /// Two downloads may both find the directory gone: the second to ask gets the directory
    /// the first opened again, not a third.
    @Test func aStaleDirectoryIsReplacedOnce() throws {
        try withSlot { slot, root in
            let path = root.appendingPathComponent("partials").path
            let stale = try slot.partials(path)
            let replaced = try slot.partials(path, replacing: stale)
            #expect(replaced !== stale)
            #expect(try slot.partials(path, replacing: stale) === replaced)
        }
    }

    /// A temporary-files cleaner removes the empty partials directory while the process
    /// holds it open: the next download's file is made in the directory made again, and
    /// moves to its destination.
    @Test func aRemovedDirectoryIsMadeAgainForTheNextFile() throws {
        try withSlot { slot, root in
            let partials = root.appendingPathComponent("partials")
            let first = try PartialFile(in: partials, slot: slot)
            first.discard()
            #expect(rmdir(partials.path) == 0)

            let second = try PartialFile(in: partials, slot: slot)
            #expect(FileManager.default.fileExists(atPath: second.path))
            let body = Data("moved whole".utf8)
            try body.withUnsafeBytes { try second.write($0, at: 0) }
            try second.finish()
            let destination = root.appendingPathComponent("out.txt")
            try FileSystem.moveFile(from: second.moveSource, to: destination, createDirectories: false, replace: false)
            #expect(try Data(contentsOf: destination) == body)
        }
    }

    /// A directory on a file system held in memory (tmpfs, ramfs) is known as one, so that
    /// its partial files are never flushed; any other is not. Checked against `stat -f` for
    /// `/dev/shm` (tmpfs), the temporary directory and the package's own (on a disk).
    @Test func aFileSystemInMemoryIsKnownAsVolatile() throws {
        let paths = [
            "/dev/shm", FileManager.default.temporaryDirectory.path,
            URL(fileURLWithPath: #filePath).deletingLastPathComponent().path,
        ]
        var seen: Set<Bool> = []
        for path in paths where FileManager.default.fileExists(atPath: path) {
            let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            try #require(descriptor >= 0)
            let held = HeldDirectory(descriptor: descriptor)
            let type = try Self.fileSystemType(of: path)
            #expect(held.isVolatile == ["tmpfs", "ramfs"].contains(type), "\(path) is on \(type)")
            seen.insert(held.isVolatile)
        }
        #expect(seen == [true, false], "a directory in memory and one on a disk were both checked")
    }

    /// The file system type `stat -f` names for `path`.
    private static func fileSystemType(of path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stat")
        process.arguments = ["-f", "-c", "%T", path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
