import NIOCore
import Testing

@testable import Ferry

@Suite("LineSplitter: lines from chunks, no I/O")
struct LineSplitterTests {
    /// Feeds `chunks` one by one and collects every line, the last one included.
    private func lines(_ chunks: [String], maximumLength: Int = 1 << 20) throws -> [String] {
        var splitter = LineSplitter(maximumLength: maximumLength)
        var lines: [String] = []
        for chunk in chunks {
            splitter.append(ByteBuffer(string: chunk))
            while let line = try splitter.nextLine() { lines.append(line) }
        }
        if let last = splitter.finish() { lines.append(last) }
        return lines
    }

    @Test func splitsAtNewlinesAndDropsTheCarriageReturnBeforeThem() throws {
        #expect(try lines(["a\nb\r\nc\n"]) == ["a", "b", "c"])
        #expect(try lines(["\n\n"]) == ["", ""])
        #expect(try lines(["a\rb\n"]) == ["a\rb"], "a lone \\r is part of the line")
    }

    @Test func aLineMaySpanChunksAndTheCarriageReturnMayEndOne() throws {
        #expect(try lines(["he", "llo\r", "\nwor", "ld\n"]) == ["hello", "world"])
    }

    @Test func theLastLineNeedsNoNewline() throws {
        #expect(try lines(["a\nlast"]) == ["a", "last"])
        #expect(try lines(["a\nlast\r"]) == ["a", "last"])
        #expect(try lines([""]) == [])
        #expect(try lines([]) == [])
    }

    @Test func utf8SplitAcrossChunksDecodesWhole() throws {
        var splitter = LineSplitter(maximumLength: 100)
        let bytes = Array("día\n".utf8)
        splitter.append(ByteBuffer(bytes: bytes[0..<2]))
        #expect(try splitter.nextLine() == nil)
        splitter.append(ByteBuffer(bytes: bytes[2...]))
        #expect(try splitter.nextLine() == "día")
        splitter.append(ByteBuffer(bytes: [0x61, 0xFF, 0x0A]))
        #expect(try splitter.nextLine() == "a\u{FFFD}")
    }

    @Test func aLineLongerThanTheLimitThrowsWithOrWithoutItsNewline() throws {
        #expect(try lines(["12345\n"], maximumLength: 5) == ["12345"])
        #expect(throws: FerryError.self) { try lines(["123456\n"], maximumLength: 5) }
        // A server that never sends a newline is stopped once the limit is passed.
        var splitter = LineSplitter(maximumLength: 5)
        splitter.append(ByteBuffer(string: "123"))
        #expect(try splitter.nextLine() == nil)
        splitter.append(ByteBuffer(string: "456"))
        #expect(throws: FerryError.self) { try splitter.nextLine() }
    }
}
