import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// httpbin's `/anything` reply: what it read of the request.
private struct Anything: Decodable {
    var method: String
    var headers: [String: String]
    var data: String
}

/// Uploads to servers that answer, and close, once they have the whole body: gunicorn's sync
/// worker (`Connection: close` on every response). Once, 20–60 % of 36–64 KB uploads failed
/// there with "connection closed" while curl never failed.
@Suite("Uploads that end cleanly with servers that close", .serialized, .enabled(if: Httpbin.enabled))
struct ClosingServerUploadTests {
    static let sizes = [0, 1, 1000, 36 * 1024, 48 * 1024, 64 * 1024, 100_000, 256 * 1024 + 1, 1 << 20]

    /// Every body source, every size from 0 B to 1 MiB, 20 times each: zero failures, and
    /// the server read exactly the body's length.
    @Test(arguments: ["data", "file", "multipart", "stream"])
    func everySourceAndSizeEndsCleanlyWithGunicorn(source: String) async throws {
        try await withHttpbin { httpbin in
            let session = try makeSession()
            let scratch = try makeTemporaryDirectory("closing")
            defer { try? FileManager.default.removeItem(at: scratch) }
            var failures: [String] = []
            for size in Self.sizes {
                let body = TestContent.data(size: Int64(size), seed: UInt64(size % 251))
                let file = scratch.appendingPathComponent("body-\(size).bin")
                try body.write(to: file)
                for attempt in 0..<20 {
                    var request = URLRequest(url: URL(string: httpbin.url("/anything"))!, method: .put)
                    request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
                    do {
                        let (data, response): (Data, HTTPResponse)
                        switch source {
                        case "data":
                            (data, response) = try await session.upload(for: request, from: body)
                        case "file":
                            (data, response) = try await session.upload(for: request, fromFile: file)
                        case "multipart":
                            var form = MultipartFormData()
                            try form.append(
                                fileURL: file,
                                name: "file",
                                fileName: "body.bin",
                                mimeType: "application/octet-stream"
                            )
                            request.method = .post
                            (data, response) = try await session.upload(for: request, multipartFormData: form)
                        default:
                            let chunks = AsyncStream<Data> { continuation in
                                var offset = 0
                                while offset < body.count {
                                    continuation.yield(body[offset..<min(offset + 16_384, body.count)])
                                    offset += 16_384
                                }
                                continuation.finish()
                            }
                            let task = session.uploadTask(with: request, fromStream: chunks, length: Int64(body.count))
                            let events = task.events
                            task.resume()
                            for await _ in events {}
                            if let error = task.error { throw error }
                            (data, response) = (task.receivedData ?? Data(), try #require(task.response))
                        }
                        let echo = try JSONDecoder().decode(Anything.self, from: data)
                        if response.statusCode != 200 { failures.append("\(size)#\(attempt): \(response.statusCode)") }
                        if source != "multipart", echo.headers["Content-Length"] != String(size), size > 0 {
                            failures.append("\(size)#\(attempt): server read \(echo.headers["Content-Length"] ?? "?")")
                        }
                    } catch {
                        failures.append("\(size)#\(attempt): \(error)")
                    }
                }
            }
            #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(5))")
        }
    }

    /// `ferry put` and `curl -T` side by side, 20 times each with a 48 KB body: both always
    /// succeed.
    @Test func ferryPutAndCurlUploadAlike() async throws {
        try await withHttpbin { httpbin in
            let scratch = try makeTemporaryDirectory("put-vs-curl")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let file = scratch.appendingPathComponent("body.bin")
            try TestContent.data(size: 48 * 1024, seed: 3).write(to: file)
            var statuses: [String: [Int32]] = [:]
            for _ in 0..<20 {
                let ours = try await ProcessRunner.run(
                    ProcessRunner.ferry,
                    ["put", "-q", file.path, httpbin.url("/anything")]
                )
                let theirs = try await ProcessRunner.run(
                    "/usr/bin/curl",
                    ["-sf", "-T", file.path, httpbin.url("/anything")]
                )
                statuses["ferry", default: []].append(ours.status)
                statuses["curl", default: []].append(theirs.status)
                #expect(try JSONDecoder().decode(Anything.self, from: ours.stdout).headers["Content-Length"] == "49152")
            }
            #expect(statuses["ferry"] == Array(repeating: 0, count: 20))
            #expect(statuses["curl"] == Array(repeating: 0, count: 20))
        }
    }

    /// A server that answers before it has read the body (413 over its size limit, 401
    /// before authentication) is reported with its status, not as a network error: nginx,
    /// FerryTestServer's `/early`, each 20 times, with a 1 MiB and a 20 MiB body.
    @Test(.enabled(if: Nginx.enabled))
    func earlyAnswersAreReportedWithTheirStatus() async throws {
        let root = try makeTemporaryDirectory("early-root")
        defer { try? FileManager.default.removeItem(at: root) }
        try "ada:{PLAIN}pw\n".write(to: root.appendingPathComponent("htpasswd"), atomically: true, encoding: .utf8)
        let nginx = try await Nginx(
            serving: root,
            server: """
                client_max_body_size 1k;
                location = /upload { return 200 "ok"; }
                location /private/ {
                    client_max_body_size 100m;
                    auth_basic "ferry"; auth_basic_user_file \(root.path)/htpasswd;
                }
                """
        )
        defer { nginx.stop() }
        try await withServer { server in
            let session = try makeSession()
            let targets = [
                ("http://127.0.0.1:\(nginx.port)/upload", 413),
                ("http://127.0.0.1:\(nginx.port)/private/x", 401),
                (server.url("/early?status=413").absoluteString, 413),
            ]
            for size in [1 << 20, 20 << 20] {
                let body = Data(count: size)
                for (url, status) in targets {
                    for _ in 0..<20 {
                        let request = URLRequest(url: URL(string: url)!, method: .put)
                        do {
                            let (_, response) = try await session.upload(for: request, from: body)
                            #expect(response.statusCode == status, "\(url)")
                        } catch {
                            Issue.record("\(url), \(size) bytes: \(error)")
                        }
                    }
                }
            }
        }
    }
}
