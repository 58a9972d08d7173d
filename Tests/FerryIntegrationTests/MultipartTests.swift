import Crypto
import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

func sha256Hex(_ data: Data) -> String { SHA256.hash(data: data).map { String(format: "%02x", $0) }.joined() }

@Suite("Multipart uploads")
struct MultipartTests {
    func send(_ form: MultipartFormData, to url: URL, session: Session) async throws -> SinkReport {
        let (data, response) = try await session.upload(
            for: URLRequest(url: url, method: .post),
            multipartFormData: form
        )
        #expect(response.statusCode == 200)
        return try JSONDecoder().decode(SinkReport.self, from: data)
    }

    /// multipart-kit reads the encoding; the sink's fast scanner (used for 1 GiB) must read
    /// the same.
    @Test(arguments: ["/sink", "/sink?parser=scan"])
    func independentParserReadsBackEveryKindOfPart(sink path: String) async throws {
        try await withServer { server in
            let session = try makeSession()
            let directory = try makeTemporaryDirectory("form")
            let text = directory.appendingPathComponent("a.txt")
            try Data("first file\n".utf8).write(to: text)
            let binary = directory.appendingPathComponent("b.bin")
            let binaryData = TestContent.data(size: 300_001, seed: 21)
            try binaryData.write(to: binary)
            let empty = directory.appendingPathComponent("empty.dat")
            try Data().write(to: empty)

            var form = MultipartFormData()
            form.append("ada", name: "user")
            try form.append(fileURL: text, name: "docs")
            try form.append(fileURL: binary, name: "docs")
            try form.append(fileURL: empty, name: "nothing")
            form.append(
                Data([0, 255, 13, 10, 45, 45]),
                name: "custom",
                fileName: "raw",
                mimeType: "application/x-custom"
            )
            form.append("value", name: "we\"ird\r\nname ü")
            form.append(Data("x".utf8), name: "file", fileName: "na\"ïve\r\n.txt")
            let streamed = TestContent.data(size: 70_000, seed: 22)
            form.append(
                stream: AsyncStream<Data> { continuation in
                    continuation.yield(streamed.prefix(30_000))
                    continuation.yield(streamed.suffix(40_000))
                    continuation.finish()
                },
                length: 70_000,
                name: "stream",
                fileName: "s.bin"
            )

            let sink = try await send(form, to: server.url(path), session: session)
            #expect(sink.multipartError == nil)
            #expect(sink.bytes == form.contentLength)
            #expect(sink.contentLength == form.contentLength)
            let parts = try #require(sink.parts)
            #expect(parts.count == 8)
            guard parts.count == 8 else { return }
            #expect(parts[0].header("Content-Disposition") == "form-data; name=\"user\"")
            #expect(parts[0].header("Content-Type") == nil)
            #expect(parts[0].text == "ada")
            #expect(parts[1].header("Content-Disposition") == "form-data; name=\"docs\"; filename=\"a.txt\"")
            #expect(parts[1].header("Content-Type") == "text/plain")
            #expect(parts[1].text == "first file\n")
            #expect(parts[2].header("Content-Disposition") == "form-data; name=\"docs\"; filename=\"b.bin\"")
            #expect(parts[2].header("Content-Type") == "application/octet-stream")
            #expect(parts[2].bytes == 300_001)
            #expect(parts[2].sha256 == sha256Hex(binaryData))
            #expect(parts[3].bytes == 0)
            #expect(parts[3].header("Content-Disposition") == "form-data; name=\"nothing\"; filename=\"empty.dat\"")
            #expect(parts[4].header("Content-Type") == "application/x-custom")
            #expect(parts[4].sha256 == sha256Hex(Data([0, 255, 13, 10, 45, 45])))
            #expect(parts[5].header("Content-Disposition") == "form-data; name=\"we%22ird%0D%0Aname ü\"")
            #expect(
                parts[6].header("Content-Disposition") == "form-data; name=\"file\"; filename=\"na%22ïve%0D%0A.txt\""
            )
            #expect(parts[7].sha256 == sha256Hex(streamed))
        }
    }

    @Test func largeFilePartStreamsAndProgressEndsAtTheLength() async throws {
        try await withServer { server in
            let session = try makeSession()
            let file = try makeTemporaryDirectory("bigform").appendingPathComponent("big.bin")
            // Several 256 KiB chunks; the sink's parser (multipart-kit) is slow in debug builds.
            let size: Int64 = (3 << 20) + 1
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            let handle = try FileHandle(forWritingTo: file)
            var offset: Int64 = 0
            while offset < size {
                let end = min(size, offset + (4 << 20))
                try handle.write(contentsOf: TestContent.data(size: size, seed: 23, range: offset..<end))
                offset = end
            }
            try handle.close()
            var form = MultipartFormData()
            form.append("big", name: "title")
            try form.append(fileURL: file, name: "upload")
            let task = session.uploadTask(
                with: URLRequest(url: server.url("/sink"), method: .post),
                multipartFormData: form
            )
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(task.error == nil)
            let sink = try JSONDecoder().decode(SinkReport.self, from: try #require(task.receivedData))
            #expect(sink.parts?.last?.sha256 == TestContent.sha256(size: size, seed: 23))
            #expect(sink.bytes == form.contentLength)
            var last: Int64 = 0
            for case .sentBodyData(_, let total, let expected) in seen {
                #expect(total >= last)
                #expect(expected == form.contentLength)
                last = total
            }
            #expect(last == form.contentLength)
        }
    }

    @Test func a307RedirectResendsTheWholeForm() async throws {
        try await withServer { server in
            let session = try makeSession()
            let file = try makeTemporaryDirectory("redirect").appendingPathComponent("r.bin")
            let content = TestContent.data(size: 500_000, seed: 24)
            try content.write(to: file)
            var form = MultipartFormData()
            form.append("again", name: "field")
            try form.append(fileURL: file, name: "file")
            let sink = try await send(form, to: server.url("/redirect-to?status=307&url=/sink"), session: session)
            #expect(sink.bytes == form.contentLength)
            #expect(sink.parts?.count == 2)
            #expect(sink.parts?.last?.sha256 == sha256Hex(content))

            var streaming = MultipartFormData()
            streaming.append(
                stream: AsyncStream<Data> {
                    $0.yield(Data("once".utf8))
                    $0.finish()
                },
                length: 4,
                name: "s"
            )
            #expect(!streaming.isReplayable)
            await #expect {
                try await session.upload(
                    for: URLRequest(url: server.url("/redirect-to?status=307&url=/sink"), method: .post),
                    multipartFormData: streaming
                )
            } throws: { error in
                (error as? FerryError)?.reason == .bodyNotReplayable
            }
        }
    }

    @Test func encodedToAFileAndUploadedFromIt() async throws {
        try await withServer { server in
            let session = try makeSession()
            var form = MultipartFormData()
            form.append("from a file", name: "note")
            form.append(TestContent.data(size: 10_000, seed: 25), name: "blob", fileName: "blob.bin")
            let encoded = try makeTemporaryDirectory("encoded").appendingPathComponent("form.body")
            try await form.encode(to: encoded)
            let size = try #require(try FileManager.default.attributesOfItem(atPath: encoded.path)[.size] as? Int64)
            #expect(size == form.contentLength)
            var request = URLRequest(url: server.url("/sink"), method: .post)
            request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
            let (data, _) = try await session.upload(for: request, fromFile: encoded)
            let sink = try JSONDecoder().decode(SinkReport.self, from: data)
            #expect(sink.parts?.map { $0.bytes } == [11, 10_000])
            #expect(sink.parts?.last?.sha256 == TestContent.sha256(size: 10_000, seed: 25))
        }
    }

    @Test func aFileThatChangesSizeIsAnErrorNotAWrongBody() async throws {
        try await withServer { server in
            let session = try makeSession()
            let file = try makeTemporaryDirectory("grow").appendingPathComponent("g.txt")
            try Data("short".utf8).write(to: file)
            var form = MultipartFormData()
            try form.append(fileURL: file, name: "f")
            try Data("much longer now".utf8).write(to: file)
            await #expect {
                try await session.upload(
                    for: URLRequest(url: server.url("/sink"), method: .post),
                    multipartFormData: form
                )
            } throws: { error in
                (error as? FerryError)?.reason == .uploadBodyFailed
            }
            #expect(throws: FerryError.self) {
                var missing = MultipartFormData()
                try missing.append(fileURL: URL(fileURLWithPath: "/nonexistent/file"), name: "f")
            }
        }
    }

    @Test func theBoundaryNeverOccursInAnInMemoryPart() {
        var form = MultipartFormData()
        let first = form.boundary
        form.append(Data("--\(first)\r\n".utf8), name: "trap")
        #expect(form.boundary != first)
        #expect(form.boundary.hasPrefix("ferry-"))
        #expect(form.contentType == "multipart/form-data; boundary=\(form.boundary)")
        let other = MultipartFormData()
        #expect(other.boundary != first && other.boundary.count == 38)
    }
}

@Suite("Uploads: credentials and early answers")
struct UploadExchangeTests {
    @Test func a401ThenCredentialsResendsTheWholeForm() async throws {
        try await withServer { server in
            let session = try makeSession { $0.credential = Credential(user: "ada", password: "secret") }
            var form = MultipartFormData()
            form.append("x", name: "a")
            form.append(TestContent.data(size: 200_000, seed: 31), name: "f", fileName: "f.bin")
            // basic-auth answers 401 to a request without credentials, 200 with them.
            let (data, response) = try await session.upload(
                for: URLRequest(url: server.url("/basic-auth/ada/secret"), method: .post),
                multipartFormData: form
            )
            #expect(response.statusCode == 200)
            #expect(String(decoding: data, as: UTF8.self).contains("\"authenticated\":true"))
            let sent = server.requests(to: "/basic-auth")
            #expect(sent.count == 2)
            #expect(sent[0].headers["authorization"] == nil)
            #expect(sent[1].headers["authorization"] == "Basic YWRhOnNlY3JldA==")
            #expect(sent.allSatisfy { $0.headers["content-length"] == String(form.contentLength) })
        }
    }

    @Test func credentialsAreNeverSentToAnotherOrigin() async throws {
        try await withServer { first in
            try await withServer { second in
                let session = try makeSession { $0.credential = Credential(user: "ada", password: "secret") }
                let (_, response) = try await session.data(
                    from: first.url("/redirect-to?url=\(second.url("/basic-auth/ada/secret").absoluteString)")
                )
                #expect(response.statusCode == 401)
                #expect(second.requests.allSatisfy { $0.headers["authorization"] == nil })
            }
        }
    }

    @Test(arguments: [413, 401])
    func anEarlyAnswerEndsTheTaskWithThatResponse(status: Int) async throws {
        try await withServer { server in
            let session = try makeSession()
            let body = TestContent.data(size: 8 << 20, seed: 32)
            let task = session.uploadTask(
                with: URLRequest(url: server.url("/early?status=\(status)"), method: .post),
                from: body
            )
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(task.response?.statusCode == status)
            #expect(task.receivedData == Data("rejected early\n".utf8))
        }
    }
}
