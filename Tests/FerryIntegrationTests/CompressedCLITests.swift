import Ferry
import FerryTestServer
import Foundation
import Testing

@Suite("ferry get --compressed (the real executable)")
struct CompressedCLITests {
    @Test func aCodedBodyIsWrittenDecodedToAFileAndToStandardOutput() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("compressed")
            let file = scratch.appendingPathComponent("out.bin")
            let url = server.url("/gzip/300000").absoluteString
            let toFile = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--compressed", url, "-o", file.path]
            )
            #expect(toFile.status == 0, "\(toFile.stderrText)")
            let same = try Data(contentsOf: file) == TestContent.data(size: 300_000)
            #expect(same)
            let toStdout = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q", "--compressed", url])
            let sameOut = toStdout.stdout == TestContent.data(size: 300_000)
            #expect(sameOut)
            // Both asked for a coding (the test server codes /gzip whenever asked).
            let asked = server.requests(to: "/gzip/").map { $0.headers["accept-encoding"] }
            // What this machine decodes (br and zstd where their libraries are), to both.
            #expect(asked == [ContentDecoder.acceptEncoding, ContentDecoder.acceptEncoding])
            // Without the flag, a download asks for the plain bytes.
            let plain = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q", url])
            #expect(plain.stdout == TestContent.data(size: 300_000))
            #expect(server.requests(to: "/gzip/").last?.headers["accept-encoding"] == "identity")
            // Nothing left beside the file.
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path) == ["out.bin"])
        }
    }

    /// A body that does not decode fails the download (exit 8, as any body that is not what
    /// its headers say), and nothing reaches the output: the file is the decoded body or
    /// nothing.
    @Test func aBodyThatDoesNotDecodeIsAClearErrorAndLeavesNothing() async throws {
        try await withServer { server in
            let scratch = try makeTemporaryDirectory("compressed-bad")
            let file = scratch.appendingPathComponent("out.bin")
            // Labelled gzip, but plain bytes.
            let url = server.url("/bytes/5000?encoding=gzip").absoluteString
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--compressed", url, "-o", file.path]
            )
            #expect(result.status == 8)
            #expect(result.stderrText.contains("does not decode"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
        }
    }
}
