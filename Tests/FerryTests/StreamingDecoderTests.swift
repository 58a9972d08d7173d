import Foundation
import Testing

@testable import Ferry

/// `br` and `zstd` decoding over the system's libraries, on streams made by Debian's own
/// `brotli` and `zstd` tools, fed in pieces of every size.
@Suite("StreamingDecoder (br, zstd)")
struct StreamingDecoderTests {
    static var toolsEnabled: Bool {
        (FileManager.default.isExecutableFile(atPath: "/usr/bin/brotli")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/zstd"))
            || ProcessInfo.processInfo.environment["FERRY_REQUIRE_CODEC_TOOLS"] == "1"
    }

    /// `input` coded by `tool` with `arguments` (reading standard input, writing standard
    /// output).
    static func coded(_ input: [UInt8], _ tool: String, _ arguments: [String] = []) throws -> [UInt8] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ferry-codec-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = directory.appendingPathComponent("in")
        let target = directory.appendingPathComponent("out")
        try Data(input).write(to: source)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        let options = arguments.joined(separator: " ")
        process.arguments = ["-c", "\(tool) \(options) -c < '\(source.path)' > '\(target.path)'"]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "\(tool) failed")
        return Array(try Data(contentsOf: target))
    }

    /// Text that compresses, then bytes that do not.
    static let sample: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        let words = ["ferry", "river", "bank", "rope", "tide", "crossing"]
        var text = ""
        while text.utf8.count < 300_000 { text += words[Int(generator.next() % 6)] + " " }
        return Array(text.utf8) + (0..<100_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }()

    /// Decodes `coded` fed `piece` bytes at a time.
    static func decoded(_ coded: [UInt8], _ coding: StreamingDecoder.Coding, piece: Int) throws -> [UInt8] {
        let decoder = try StreamingDecoder(coding)
        var result: [UInt8] = []
        var start = 0
        while start < coded.count {
            let end = min(coded.count, start + piece)
            try coded[start..<end].withUnsafeBytes { try decoder.decode($0) { result += $0 } }
            start = end
        }
        try decoder.finish()
        return result
    }

    static let tools: [(StreamingDecoder.Coding, String)] = [(.brotli, "brotli -q 5"), (.zstd, "zstd -q")]

    @Test(.enabled(if: toolsEnabled), arguments: [1, 7, 4093, 65_536, 1 << 20])
    func aStreamDecodesWhateverThePieces(piece: Int) throws {
        for (coding, tool) in Self.tools {
            #expect(StreamingDecoder.isAvailable(coding))
            let coded = try Self.coded(Self.sample, tool)
            #expect(coded.count < Self.sample.count)
            #expect(try Self.decoded(coded, coding, piece: piece) == Self.sample, "\(coding)")
        }
    }

    @Test(.enabled(if: toolsEnabled))
    func aTruncatedStreamIsRefusedAtItsEnd() throws {
        for (coding, tool) in Self.tools {
            let coded = try Self.coded(Self.sample, tool)
            for cut in [1, 10, coded.count / 2] {
                #expect(throws: FerryError.self, "\(coding) cut by \(cut)") {
                    _ = try Self.decoded(Array(coded.dropLast(cut)), coding, piece: 4096)
                }
            }
            // No byte at all is no stream either.
            #expect(throws: FerryError.self) { _ = try Self.decoded([], coding, piece: 1) }
        }
    }

    @Test(.enabled(if: toolsEnabled))
    func bytesThatAreNotTheCodingAreRefused() throws {
        let garbage = Array("this is not a coded body, only text that says it is".utf8)
        for (coding, _) in Self.tools {
            do {
                _ = try Self.decoded(garbage, coding, piece: 16)
                Issue.record("\(coding) decoded garbage")
            } catch let error as FerryError {
                #expect(error.reason == .badServerResponse)
            }
        }
    }

    @Test(.enabled(if: toolsEnabled))
    func afterItsEndBrotliHasNothingAndZstdHasItsNextFrame() throws {
        let first = Array("first frame\n".utf8)
        let second = Array("second frame\n".utf8)
        let brotli = try Self.coded(first, "brotli")
        #expect(throws: FerryError.self) { _ = try Self.decoded(brotli + [0x00, 0x01], .brotli, piece: 3) }
        let frames = try Self.coded(first, "zstd -q") + Self.coded(second, "zstd -q")
        #expect(try Self.decoded(frames, .zstd, piece: 5) == first + second)
    }

    @Test(.enabled(if: toolsEnabled))
    func aZstdWindowBeyondEightMebibytesIsRefused() throws {
        let input = Array(Self.sample.prefix(100_000))
        let eight = try Self.coded(input, "zstd -q --zstd=wlog=23")
        #expect(try Self.decoded(eight, .zstd, piece: 65_536) == input)
        let sixteen = try Self.coded(input, "zstd -q --zstd=wlog=24")
        #expect(throws: FerryError.self) { _ = try Self.decoded(sixteen, .zstd, piece: 65_536) }
    }
}
