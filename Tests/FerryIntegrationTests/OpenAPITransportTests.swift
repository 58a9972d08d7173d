import Ferry
import FerryOpenAPI
import FerryTestServer
import Foundation
import HTTPTypes
@_spi(Generated) import OpenAPIRuntime
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// FerryOpenAPI's transport under the runtime's own client (`UniversalClient`, which every
/// generated client calls), against httpbin on gunicorn and FerryTestServer.
@Suite("FerryOpenAPI's transport")
struct OpenAPITransportTests {
    /// One operation through the runtime's client: `request` and `body` out, the response's
    /// status, fields and whole body back.
    func call(
        _ serverURL: URL,
        _ request: HTTPTypes.HTTPRequest,
        body: HTTPBody? = nil,
        session: Session? = nil
    ) async throws -> (response: HTTPTypes.HTTPResponse, body: Data?, length: HTTPBody.Length?) {
        let client = UniversalClient(
            serverURL: serverURL,
            transport: FerryTransport(session: try session ?? makeSession())
        )
        return try await client.send(
            input: (),
            forOperation: "test",
            serializer: { _ in (request, body) },
            deserializer: { response, body in
                let length = body?.length
                var data: Data?
                if let body { data = try await Data(collecting: body, upTo: 64 << 20) }
                return (response, data, length)
            }
        )
    }

    func json(_ data: Data?) throws -> [String: Any] {
        let data = try #require(data)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// A one-shot body of `count` chunks, its length unknown (sent chunked).
    func streamedBody(_ content: Data, chunks count: Int) -> HTTPBody {
        let size = (content.count + count - 1) / count
        let stream = AsyncStream<ArraySlice<UInt8>> { continuation in
            var offset = 0
            while offset < content.count {
                continuation.yield(ArraySlice(content[offset..<min(offset + size, content.count)]))
                offset += size
            }
            continuation.finish()
        }
        return HTTPBody(stream, length: .unknown)
    }

    @Test(.enabled(if: Httpbin.enabled))
    func httpbinGetsThePathQueryAndFieldsOfTheGeneratedRequest() async throws {
        try await withHttpbin { httpbin in
            var request = HTTPTypes.HTTPRequest(
                method: .get,
                scheme: nil,
                authority: nil,
                path: "/get?pet=cat&name=a%20b"
            )
            request.headerFields[HTTPField.Name("X-Operation")!] = "listPets"
            let base = try #require(URL(string: httpbin.url("/")))
            let (response, body, length) = try await call(base, request)
            #expect(response.status == .ok)
            #expect(response.headerFields[.contentType] == "application/json")
            let echoed = try json(body)
            #expect(echoed["args"] as? [String: String] == ["pet": "cat", "name": "a b"])
            #expect((echoed["headers"] as? [String: String])?["X-Operation"] == "listPets")
            #expect(length == .known(Int64(body?.count ?? -1)), "the announced length is the body's")
        }
    }

    @Test(.enabled(if: Httpbin.enabled))
    func httpbinReceivesAStreamedBodyAndARedirectSendsAReplayableOneAgain() async throws {
        try await withHttpbin { httpbin in
            let base = try #require(URL(string: httpbin.url("/")))
            let content = TestContent.data(size: 300_000, seed: 8)
            var post = HTTPTypes.HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/anything")
            post.headerFields[.contentType] = "application/octet-stream"
            // A one-shot body of unknown length: chunked.
            let (response, body, _) = try await call(base, post, body: streamedBody(content, chunks: 7))
            #expect(response.status == .ok)
            let echoed = try json(body)
            let data = try #require(echoed["data"] as? String)
            #expect(data.hasPrefix("data:application/octet-stream;base64,"))
            #expect(
                Data(base64Encoded: String(data.dropFirst("data:application/octet-stream;base64,".count))) == content
            )

            // A 307 keeps the method and the body: a body of known length that the runtime can
            // iterate again is sent again.
            var redirected = HTTPTypes.HTTPRequest(
                method: .put,
                scheme: nil,
                authority: nil,
                path: "/redirect-to?url=/anything&status_code=307"
            )
            redirected.headerFields[.contentType] = "text/plain"
            let (again, againBody, _) = try await call(base, redirected, body: HTTPBody("twice, if need be"))
            #expect(again.status == .ok)
            let echoedAgain = try json(againBody)
            #expect(echoedAgain["method"] as? String == "PUT")
            #expect(echoedAgain["data"] as? String == "twice, if need be")

            // A one-shot body cannot follow the 307: a clear error, through the runtime.
            do {
                _ = try await call(base, redirected, body: streamedBody(Data("once".utf8), chunks: 1))
                Issue.record("a one-shot body followed a 307")
            } catch let error as ClientError {
                #expect((error.underlyingError as? FerryError)?.reason == .bodyNotReplayable)
            }
        }
    }

    @Test func aLargeBodyStreamsBothWaysAndTheBaseURLsPathIsKept() async throws {
        try await withServer { server in
            let content = TestContent.data(size: 3 << 20, seed: 9)
            var upload = HTTPTypes.HTTPRequest(method: .post, scheme: nil, authority: nil, path: "/sink")
            upload.headerFields[.contentLength] = "\(content.count)"
            let (sunk, sunkBody, _) = try await call(server.url("/"), upload, body: HTTPBody(content))
            #expect(sunk.status == .ok)
            let report = try JSONDecoder().decode(SinkReport.self, from: try #require(sunkBody))
            #expect(
                report.bytes == Int64(content.count) && !report.chunked && report.contentLength == Int64(content.count)
            )
            #expect(report.sha256 == TestContent.sha256(size: 3 << 20, seed: 9))

            // A server URL with a path (`/echo`), and the operation's path and query after it.
            let echo = HTTPTypes.HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/pets/1?full=yes")
            let (_, echoed, _) = try await call(server.url("/echo/"), echo)
            #expect(try json(echoed)["uri"] as? String == "/echo/pets/1?full=yes")

            // A 5 MiB response read as it arrives, with its length.
            let get = HTTPTypes.HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/bytes/\(5 << 20)?seed=2")
            let (response, body, length) = try await call(server.url("/"), get)
            #expect(response.status == .ok)
            #expect(length == .known(5 << 20))
            #expect(body == TestContent.data(size: 5 << 20, seed: 2))

            // HEAD has no body; an error status is a response for the generated client.
            let head = HTTPTypes.HTTPRequest(method: .head, scheme: nil, authority: nil, path: "/bytes/100")
            let (headResponse, headBody, _) = try await call(server.url("/"), head)
            #expect(headResponse.headerFields[.contentLength] == "100")
            #expect(headBody == nil)
            let missing = HTTPTypes.HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/status/404")
            #expect(try await call(server.url("/"), missing).response.status == .notFound)
        }
    }

    @Test func aRefusedConnectionIsAClientErrorWithFerrysReason() async throws {
        let port = try closedPort()
        let request = HTTPTypes.HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/pets")
        do {
            _ = try await call(try #require(URL(string: "http://127.0.0.1:\(port)")), request)
            Issue.record("a request to a closed port succeeded")
        } catch let error as ClientError {
            #expect(error.operationID == "test")
            #expect((error.underlyingError as? FerryError)?.reason == .network)
        }
    }
}
