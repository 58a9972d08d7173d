import Foundation
import Testing

@testable import Ferry

/// Which destinations are written in order in place (devices, descriptors) and which get a
/// partial file moved into place. Nothing here writes anywhere but its own directory.
@Suite("SequentialOutput")
struct SequentialOutputTests {
    func path(_ text: String) -> URL { URL(fileURLWithPath: text) }

    @Test func devicesAndDescriptorsAreWrittenInOrder() {
        #expect(SequentialOutput.isSequential(path("/dev/null")))
        #expect(SequentialOutput.isSequential(path("/dev/stdout")))
        #expect(SequentialOutput.isSequential(path("/proc/self/fd/1")))
        #expect(SequentialOutput.isSequential(path("/dev/no-such-device")))
        #expect(SequentialOutput.isSequential(path("/dev/shm/../null")))
        #expect(SequentialOutput.isSequential(path("/dev/shm")))
    }

    /// `/dev/shm` is a tmpfs for ordinary files: a download there is a partial file moved
    /// into place, as anywhere else (the benchmarks download into it).
    @Test func filesInDevShmAreOrdinaryFiles() {
        #expect(!SequentialOutput.isSequential(path("/dev/shm/ferry-not-there/file.bin")))
        #expect(!SequentialOutput.isSequential(path("/dev/shm/file.bin")) || isSpecial("/dev/shm/file.bin"))
    }

    @Test func ordinaryFilesAndMissingPathsAreNotButFIFOsAre() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("seq-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("file.bin")
        try Data("x".utf8).write(to: file)
        #expect(!SequentialOutput.isSequential(file))
        #expect(!SequentialOutput.isSequential(directory.appendingPathComponent("missing.bin")))
        let fifo = directory.appendingPathComponent("fifo")
        #expect(mkfifo(fifo.path, 0o600) == 0)
        #expect(SequentialOutput.isSequential(fifo))
    }

    /// Whether something other than a regular file or directory happens to sit at `path`.
    private func isSpecial(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        let type = info.st_mode & S_IFMT
        return type != S_IFREG && type != S_IFDIR
    }
}
