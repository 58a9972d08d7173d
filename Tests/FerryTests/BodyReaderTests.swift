import Foundation
import NIOCore
import Testing

@testable import Ferry

/// The one body loop's rules, on bodies already read (the integration suites run it on
/// every consumer against real servers).
@Suite("BodyReader")
struct BodyReaderTests {
    func body(_ parts: String...) -> ResponseBody {
        ResponseBody(buffered: CircularBuffer(parts.map { ByteBuffer(string: $0) }))
    }

    func read(_ body: ResponseBody, with reader: inout BodyReader) async throws -> String {
        var text = ""
        try await reader.read(body) { text += String(buffer: $0) }
        return text
    }

    @Test func handsOnEveryByteInOrder() async throws {
        var reader = BodyReader()
        #expect(try await read(body("ab", "", "cd"), with: &reader) == "abcd")
        #expect(reader.read == 4)
    }

    @Test func dropsTheBytesTheServerRepeatedAcrossBuffers() async throws {
        var reader = BodyReader(skip: 3)
        #expect(try await read(body("ab", "cd", "ef"), with: &reader) == "def")
        #expect(reader.skip == 0 && reader.read == 3)
    }

    @Test func refusesBytesPastTheAnnouncedLength() async throws {
        var reader = BodyReader(skip: 1, announced: 3)
        // Skipped bytes do not count; the fourth kept byte does.
        await #expect(throws: FerryError.self) { _ = try await read(body("xabc", "d"), with: &reader) }
        #expect(reader.read == 3)
    }

    @Test func aShortBodyFailsOnlyWhereTheLoopJudgesTheLength() async throws {
        var lenient = BodyReader(announced: 5)
        #expect(try await read(body("abc"), with: &lenient) == "abc")
        var strict = BodyReader(announced: 5, requiresAnnounced: true)
        let error = await #expect(throws: FerryError.self) { _ = try await read(body("abc"), with: &strict) }
        #expect(error?.reason == .badServerResponse)
    }

    @Test func theFileLimitCountsFromTheOffset() async throws {
        var reader = BodyReader(limit: .file(10, from: 8))
        let error = await #expect(throws: FerryError.self) { _ = try await read(body("ab", "c"), with: &reader) }
        #expect(error?.reason == .bodyTooLarge(limit: 10))
        #expect(reader.read == 2)
        #expect(throws: FerryError.self) { try BodyReader.SizeLimit.file(10, from: 0).refuse(announced: 11, head: nil) }
        #expect(throws: Never.self) { try BodyReader.SizeLimit.file(10, from: 0).refuse(announced: 10, head: nil) }
        #expect(throws: Never.self) { try BodyReader.SizeLimit.file(10, from: 0).refuse(announced: nil, head: nil) }
        #expect(BodyReader.SizeLimit.file(nil) == nil)
    }

    @Test func theMemoryLimitRefusesTheAnnouncedLengthBeforeAnyByte() async throws {
        let reader = BodyReader(announced: 6, limit: .memory(5))
        let error = #expect(throws: FerryError.self) {
            try reader.limit?.refuse(announced: reader.announced, head: nil)
        }
        #expect(error?.reason == .bodyTooLarge(limit: 5))
        var exact = BodyReader(limit: .memory(5))
        #expect(try await read(body("abc", "de"), with: &exact) == "abcde")
    }

    @Test func theConsumersErrorEndsTheLoop() async throws {
        struct Full: Error {}
        var reader = BodyReader()
        var calls = 0
        await #expect(throws: Full.self) {
            try await reader.read(body("a", "b")) { _ in
                calls += 1
                throw Full()
            }
        }
        #expect(calls == 1 && reader.read == 0)
    }

    /// Batches: at most `maximum` buffers, every byte once and in order, and the bytes
    /// before a refused buffer handed on before the error.
    @Test func batchesHoldAtMostTheirMaximumAndEveryByteInOrder() async throws {
        var reader = BodyReader()
        var batches: [[String]] = []
        try await reader.read(body("a", "", "bc", "d", "e", "f", "g"), batchesOf: 2) { batch in
            batches.append(batch.map { String(buffer: $0) })
        }
        // The empty buffer is no part of a batch.
        #expect(batches == [["a", "bc"], ["d", "e"], ["f", "g"]])
        #expect(reader.read == 7)

        var limited = BodyReader(limit: .memory(4))
        var handed: [String] = []
        let error = await #expect(throws: FerryError.self) {
            try await limited.read(body("ab", "c", "de"), batchesOf: 8) { batch in
                handed += batch.map { String(buffer: $0) }
            }
        }
        #expect(error?.reason == .bodyTooLarge(limit: 4))
        #expect(handed == ["ab", "c"])
        #expect(limited.read == 3)
    }

    /// A batch is written in one call at the offset, the buffers one after the other,
    /// from their reader indices.
    @Test func aBatchIsWrittenWholeAtItsOffset() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("ferry-batch-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = try PartialFile(in: directory)
        var skipped = ByteBuffer(string: "xxcd")
        skipped.moveReaderIndex(forwardBy: 2)
        let buffers = [ByteBuffer(string: "ab"), skipped, ByteBuffer(), ByteBuffer(string: "efg")]
        #expect(try file.write(buffers, at: 3) == 7)
        #expect(try file.write([ByteBuffer(string: "012")], at: 0) == 3)
        #expect(file.length == 10)
        var bytes = [UInt8](repeating: 0, count: 10)
        let count = try bytes.withUnsafeMutableBytes { try file.read(into: $0, at: 0) }
        #expect(count == 10 && String(decoding: bytes, as: UTF8.self) == "012abcdefg")
    }
}
