import Foundation
import Testing

@testable import Ferry

#if canImport(Glibc)
import Glibc
#endif

@Suite("EndedProcessLeftovers: only this user's directories of ended processes go")
struct EndedProcessLeftoversTests {
    @Test func namesAreReadExactly() {
        #expect(EndedProcessLeftovers.processID(in: "123", tagLength: 0) == 123)
        #expect(EndedProcessLeftovers.processID(in: "123-abcdefgh", tagLength: 8) == 123)
        #expect(EndedProcessLeftovers.processID(in: "123-abc", tagLength: 8) == nil)
        #expect(EndedProcessLeftovers.processID(in: "123-abcdefgh", tagLength: 0) == nil)
        #expect(EndedProcessLeftovers.processID(in: "123-abcd-fgh", tagLength: 8) == nil)
        #expect(EndedProcessLeftovers.processID(in: "+123", tagLength: 0) == nil)
        #expect(EndedProcessLeftovers.processID(in: "0", tagLength: 0) == nil)
        #expect(EndedProcessLeftovers.processID(in: "", tagLength: 0) == nil)
        #expect(EndedProcessLeftovers.processID(in: "ABCDEFGH-123", tagLength: 3) == nil)
        #expect(EndedProcessLeftovers.processID(in: "99999999999", tagLength: 0) == nil)
        // Digits of other scripts are numbers to Swift, but no process id.
        #expect(EndedProcessLeftovers.processID(in: "１２３", tagLength: 0) == nil)
        #expect(EndedProcessLeftovers.processID(in: "١٢٣", tagLength: 0) == nil)
        #expect(EndedProcessLeftovers.processID(in: "12a", tagLength: 0) == nil)
    }

    @Test func anEndedProcessesDirectoryGoesAndEverythingElseStays() throws {
        let base = FileManager.default.temporaryDirectory
            .appendingPathComponent("ferry-leftovers-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }

        // A process that has ended: its id names no process now.
        let ended = Process()
        ended.executableURL = URL(fileURLWithPath: "/bin/sh")
        ended.arguments = ["-c", "exit 0"]
        try ended.run()
        ended.waitUntilExit()
        let gone = ended.processIdentifier
        // Every name below that is kept for another reason (a link, a file, another owner)
        // names an ended process too, so that it is kept for that reason alone.
        for pid in [gone, gone + 1_000_000, gone + 2_000_000, gone * 10] {
            try #require(kill(pid, 0) == -1 && errno == ESRCH, "process \(pid) exists")
        }

        func make(_ name: String) throws {
            try FileManager.default.createDirectory(
                at: base.appendingPathComponent(name),
                withIntermediateDirectories: false
            )
        }
        try make("x-\(gone)")
        try make("x-\(getpid())")
        try make("x-\(getppid())")
        try make("x-\(gone)-tag")
        try make("y-\(gone)")
        try FileManager.default.createSymbolicLink(
            atPath: base.appendingPathComponent("x-\(gone + 1_000_000)").path,
            withDestinationPath: base.appendingPathComponent("y-\(gone)").path
        )
        #expect(FileManager.default.createFile(atPath: base.appendingPathComponent("x-\(gone)0").path, contents: nil))
        var kept = [
            "x-\(getpid())", "x-\(getppid())", "x-\(gone)-tag", "y-\(gone)", "x-\(gone + 1_000_000)", "x-\(gone)0",
        ]
        if geteuid() == 0 {
            // Another user's directory of an ended process stays too.
            try make("x-\(gone + 2_000_000)")
            try #require(chown(base.appendingPathComponent("x-\(gone + 2_000_000)").path, 65_534, 65_534) == 0)
            kept.append("x-\(gone + 2_000_000)")
        }

        EndedProcessLeftovers.remove(in: base, prefix: "x-", tagLength: 0)

        let left = Set(try FileManager.default.contentsOfDirectory(atPath: base.path))
        #expect(left == Set(kept))
    }
}
