import Foundation
import Testing

/// The fuzz targets' seed corpora, replayed by the plain build of `ferry-fuzz` in every test
/// run: each input a server, a file or a user could hand a hand-written parser (response
/// heads, `Content-Disposition`, `Set-Cookie`, cookies.txt, `.netrc`, Digest challenges,
/// `Content-Range`, resume data) returns. `Fuzz/run` (and `.ci/run`) drives the same targets
/// with libFuzzer and AddressSanitizer.
@Suite("Fuzz corpora")
struct FuzzCorpusTests {
    /// `Fuzz/Corpus` in the repository.
    var corpus: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus", isDirectory: true)
    }

    var replay: String { ProcessRunner.productsDirectory.appendingPathComponent("ferry-fuzz").path }

    @Test func everySeedOfEveryTargetReturns() async throws {
        let targets = try FileManager.default.contentsOfDirectory(atPath: corpus.path)
        #expect(targets.count == 10)
        var seeds = 0
        for target in targets {
            let files = try FileManager.default.contentsOfDirectory(atPath: corpus.appendingPathComponent(target).path)
            #expect(!files.isEmpty, "no seeds for \(target)")
            seeds += files.count
        }
        let result = try await ProcessRunner.run(replay, [corpus.path])
        #expect(result.status == 0, "\(result.stdoutText)\(result.stderrText)")
        #expect(result.stdoutText.contains("\(seeds) inputs replayed"))
    }

    @Test func aCorpusWithoutInputsFailsTheReplay() async throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-fuzz-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        let result = try await ProcessRunner.run(replay, [empty.path])
        #expect(result.status == 1)
        #expect(result.stderrText.contains("no inputs"))
    }
}
