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
}
