import NIOCore
import Testing

@testable import Ferry

@Suite("ResponseHeadParser: a response head from raw bytes, no I/O")
struct ResponseHeadParserTests {
    @Test func aHeadInPiecesAndWhatFollowsIt() throws {
        var parser = ResponseHeadParser()
        parser.append(ByteBuffer(string: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"))
        #expect(try parser.head() == nil)
        parser.append(ByteBuffer(string: "Connection:Upgrade\r\n\r\n\u{81}\u{02}hi"))
        let head = try #require(try parser.head())
        #expect(head.statusCode == 101)
        #expect(head.reasonPhrase == "Switching Protocols")
        #expect(head.value(of: "upgrade") == "websocket")
        #expect(head.value(of: "Connection") == "Upgrade")
        #expect(parser.remainder.readableBytes == 5, "the upgraded protocol's first bytes stay")
    }

    @Test func framingFollowsRFC9112() throws {
        func head(_ status: Int, _ fields: [(String, String)]) -> ResponseHeadParser.Head {
            .init(version: "HTTP/1.1", statusCode: status, reasonPhrase: "", fields: fields.map { ($0.0, $0.1) })
        }
        #expect(try ResponseHeadParser.framing(of: head(101, []), method: "GET") == .none)
        #expect(try ResponseHeadParser.framing(of: head(200, []), method: "CONNECT") == .none)
        #expect(
            try ResponseHeadParser.framing(of: head(407, [("Content-Length", "12")]), method: "CONNECT") == .length(12)
        )
        #expect(
            try ResponseHeadParser.framing(of: head(400, [("Transfer-Encoding", "chunked")]), method: "GET") == .chunked
        )
        #expect(
            try ResponseHeadParser.framing(of: head(400, [("Transfer-Encoding", "gzip")]), method: "GET") == .untilClose
        )
        #expect(try ResponseHeadParser.framing(of: head(200, []), method: "GET") == .untilClose)
        #expect(throws: FerryError.self) {
            try ResponseHeadParser.framing(of: head(200, [("Content-Length", "-1")]), method: "GET")
        }
    }

    @Test func malformedHeadsAreErrors() {
        for text in [
            "SSH-2.0-OpenSSH\r\n\r\n", "HTTP/1.1 abc\r\n\r\n", "HTTP/1.1 200 OK\r\n folded\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        ] {
            var parser = ResponseHeadParser()
            parser.append(ByteBuffer(string: text))
            #expect(throws: FerryError.self, "\(text)") { try parser.head() }
        }
        var endless = ResponseHeadParser(maximumSize: 100)
        endless.append(ByteBuffer(string: "HTTP/1.1 200 OK\r\n" + String(repeating: "X-A: b\r\n", count: 20)))
        #expect(throws: FerryError.self) { try endless.head() }
    }
}
