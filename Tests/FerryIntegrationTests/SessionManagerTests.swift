import Ferry
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// httpbin's `/anything` reply, as far as these tests read it.
struct HttpbinEcho: Decodable, Sendable {
    var method: String
    var url: String
    var args: [String: String]
    var form: [String: String]
    var files: [String: String]
    var json: [String: String]?
    var headers: [String: String]
}

/// `HTTPSessionManager` against httpbin (gunicorn): the calls an AFNetworking user makes.
@Suite("HTTPSessionManager with httpbin", .serialized, .enabled(if: Httpbin.enabled))
struct SessionManagerTests {
    func manager(
        _ httpbin: Httpbin,
        base: String = "/anything/api/v1"
    ) throws -> HTTPSessionManager<
        DecodableResponseSerializer<HttpbinEcho>
    > {
        try HTTPSessionManager(
            baseURL: URL(string: httpbin.url(base)),
            responseSerializer: .decodable(HttpbinEcho.self)
        )
    }

    @Test func getPutsParametersInTheQueryUnderTheBaseURL() async throws {
        try await withHttpbin { httpbin in
            let api = try manager(httpbin)
            let (echo, response) = try await api.get("items", parameters: ["q": "ferry boats", "page": "2"])
            #expect(response.statusCode == 200)
            #expect(echo.method == "GET")
            #expect(echo.args == ["q": "ferry boats", "page": "2"])
            #expect(echo.url.hasPrefix(httpbin.url("/anything/api/v1/items?")))
        }
    }

    @Test func postSendsAFormByDefaultAndJSONWhenAsked() async throws {
        try await withHttpbin { httpbin in
            let api = try manager(httpbin)
            let (form, _) = try await api.post("users", parameters: ["name": "Ada", "role": "admin"])
            #expect(form.form == ["name": "Ada", "role": "admin"])
            #expect(form.headers["Content-Type"]?.hasPrefix("application/x-www-form-urlencoded") == true)
            api.bodyEncoder = JSONParameterEncoder.default
            let (json, _) = try await api.post("users", parameters: ["name": "Ada"])
            #expect(json.json == ["name": "Ada"])
            #expect(json.headers["Content-Type"] == "application/json")
            let (patched, _) = try await api.patch("users/1", parameters: ["role": "owner"])
            #expect(patched.method == "PATCH" && patched.json == ["role": "owner"])
        }
    }

    @Test func multipartPostCarriesParametersAndFiles() async throws {
        try await withHttpbin { httpbin in
            let api = try manager(httpbin)
            let file = try makeTemporaryDirectory().appendingPathComponent("notes.txt")
            try Data("ferry notes\n".utf8).write(to: file)
            let (echo, _) = try await api.post("upload", parameters: ["album": "2026"]) { form in
                try form.append(fileURL: file, name: "attachment")
            }
            #expect(echo.form == ["album": "2026"])
            #expect(echo.files == ["attachment": "ferry notes\n"])
            #expect(echo.headers["Content-Type"]?.hasPrefix("multipart/form-data; boundary=") == true)
        }
    }

    @Test func defaultHeadersAndBasicAuthorizationGoWithEveryRequest() async throws {
        try await withHttpbin { httpbin in
            let api = try manager(httpbin)
            api.setBasicAuthorization(user: "user", password: "passwd")
            api.setValue("application/json", forHTTPHeaderField: "Accept")
            let (echo, _) = try await api.put("files/1", parameters: ["x": "1"], headers: ["X-Trace": "t1"])
            #expect(echo.method == "PUT")
            #expect(echo.headers["Authorization"] == "Basic dXNlcjpwYXNzd2Q=")
            #expect(echo.headers["Accept"] == "application/json")
            #expect(echo.headers["X-Trace"] == "t1")
            // A request's own field wins over the default.
            let (own, _) = try await api.get("me", headers: ["accept": "text/plain"])
            #expect(own.headers["Accept"] == "text/plain")
            api.clearAuthorization()
            let (anonymous, _) = try await api.delete("files/1", parameters: ["force": "true"])
            #expect(anonymous.headers["Authorization"] == nil)
            #expect(anonymous.method == "DELETE" && anonymous.args == ["force": "true"])

            // httpbin's own check of the credentials.
            let plain = try HTTPSessionManager(baseURL: URL(string: httpbin.url("/")))
            plain.setBasicAuthorization(user: "user", password: "passwd")
            let (_, accepted) = try await plain.get("basic-auth/user/passwd")
            #expect(accepted.statusCode == 200)
        }
    }

    @Test func anUnacceptableStatusIsATypedErrorAndHeadReturnsTheHead() async throws {
        try await withHttpbin { httpbin in
            let api = try HTTPSessionManager(baseURL: URL(string: httpbin.url("/")))
            await #expect(throws: FerryError.self) { try await api.get("status/404") }
            do {
                _ = try await api.get("status/418")
            } catch let error as FerryError {
                #expect(error.reason == .unacceptableStatusCode(418))
            }
            let head = try await api.head("bytes/100")
            #expect(head.statusCode == 200)
            #expect(head.headers["Content-Length"] == "100")
        }
    }
}

/// The AFNetworking-shaped calls: progress, success, failure, and the task returned.
@Suite("HTTPSessionManager callbacks with httpbin", .serialized, .enabled(if: Httpbin.enabled))
struct SessionManagerCallbackTests {
    enum Outcome: Sendable {
        case success(DataTask, HttpbinEcho)
        case failure(DataTask?, FerryError)
    }

    func firstOf(_ outcomes: AsyncStream<Outcome>) async -> Outcome? {
        for await outcome in outcomes { return outcome }
        return nil
    }

    func api(_ httpbin: Httpbin) throws -> HTTPSessionManager<DecodableResponseSerializer<HttpbinEcho>> {
        try HTTPSessionManager(
            baseURL: URL(string: httpbin.url("/anything/")),
            responseSerializer: .decodable(HttpbinEcho.self)
        )
    }

    @Test func getCallsProgressThenSuccessWithTheReturnedTask() async throws {
        try await withHttpbin { httpbin in
            let (outcomes, continuation) = AsyncStream.makeStream(of: Outcome.self)
            let progress = MutexBox<[TransferProgress]>([])
            let returned = try api(httpbin).get(
                "items",
                parameters: ["q": "1"],
                progress: { value in progress.mutate { $0.append(value) } },
                success: { task, echo in continuation.yield(.success(task, echo)) },
                failure: { task, error in continuation.yield(.failure(task, error)) }
            )
            let first = await firstOf(outcomes)
            guard case .success(let task, let echo) = first else {
                Issue.record("no success: \(String(describing: first))")
                return
            }
            #expect(task === returned)
            #expect(echo.args == ["q": "1"])
            let last = try #require(progress.value.last)
            #expect(last.completedBytes == last.totalBytes && last.completedBytes > 0)
        }
    }

    @Test func failuresCarryTheTaskOrNilWhenNoneWasMade() async throws {
        try await withHttpbin { httpbin in
            let plain = try HTTPSessionManager(baseURL: URL(string: httpbin.url("/")))
            let (outcomes, continuation) = AsyncStream.makeStream(of: (DataTask?, FerryError).self)
            let returned = plain.delete(
                "status/404",
                success: { _, _ in Issue.record("a 404 succeeded") },
                failure: { task, error in continuation.yield((task, error)) }
            )
            let unbuilt = plain.get(
                "ftp://files.example/x",
                success: { _, _ in Issue.record("an ftp URL succeeded") },
                failure: { task, error in continuation.yield((task, error)) }
            )
            #expect(unbuilt == nil)
            var heard: [(DataTask?, FerryError)] = []
            for await outcome in outcomes {
                heard.append(outcome)
                if heard.count == 2 { break }
            }
            let notFound = try #require(heard.first { $0.1.reason == .unacceptableStatusCode(404) })
            #expect(notFound.0 === returned)
            let invalid = try #require(heard.first { $0.1.reason == .invalidURL })
            #expect(invalid.0 == nil)
        }
    }

    @Test func multipartPostReportsUploadProgress() async throws {
        try await withHttpbin { httpbin in
            let file = try makeTemporaryDirectory().appendingPathComponent("big.bin")
            try Data(repeating: 0x61, count: 1_000_000).write(to: file)
            let (outcomes, continuation) = AsyncStream.makeStream(of: Outcome.self)
            let progress = MutexBox<[TransferProgress]>([])
            try api(httpbin).post(
                "upload",
                parameters: ["album": "2026"],
                constructingBody: { form in try form.append(fileURL: file, name: "attachment") },
                progress: { value in progress.mutate { $0.append(value) } },
                success: { task, echo in continuation.yield(.success(task, echo)) },
                failure: { task, error in continuation.yield(.failure(task, error)) }
            )
            let first = await firstOf(outcomes)
            guard case .success(_, let echo) = first else {
                Issue.record("no success: \(String(describing: first))")
                return
            }
            #expect(echo.form == ["album": "2026"])
            #expect(echo.files["attachment"]?.count == 1_000_000)
            let sent = progress.value.map(\.completedBytes)
            #expect(sent == sent.sorted() && sent.count >= 1)
            #expect(
                progress.value.last.map { $0.completedBytes == $0.totalBytes && $0.completedBytes > 1_000_000 } == true
            )
        }
    }
}

/// RFC 3986 resolution of paths against the base URL, as AFNetworking's
/// `URLWithString:relativeToURL:` (no server needed).
@Suite("HTTPSessionManager URLs")
struct SessionManagerURLTests {
    @Test func pathsResolveAgainstTheBaseURL() throws {
        let api = try HTTPSessionManager(baseURL: URL(string: "https://api.example.com/v1"))
        #expect(try api.url(for: "users").absoluteString == "https://api.example.com/v1/users")
        #expect(try api.url(for: "users?page=2").absoluteString == "https://api.example.com/v1/users?page=2")
        #expect(try api.url(for: "/users").absoluteString == "https://api.example.com/users")
        #expect(try api.url(for: "../v2/users").absoluteString == "https://api.example.com/v2/users")
        #expect(try api.url(for: "https://other.example/x").absoluteString == "https://other.example/x")
        #expect(throws: FerryError.self) { try api.url(for: "ftp://files.example/x") }
        let unrooted = try HTTPSessionManager(baseURL: nil)
        #expect(throws: FerryError.self) { try unrooted.url(for: "users") }
    }

    /// `HEAD` in AFNetworking's shape: `success` with the task holding the accepted head,
    /// `failure` once for an unacceptable status; httpbin reads the manager's arrays as
    /// AFNetworking writes them (`tag[]=a&tag[]=b`).
    @Test func headCallsSuccessWithTheTaskAndArraysGoWithBrackets() async throws {
        try await withHttpbin { httpbin in
            let api = try HTTPSessionManager(baseURL: URL(string: httpbin.url("/")))
            let heads = AsyncStream<(DataTask?, FerryError?)>.makeStream()
            api.head(
                "bytes/100",
                success: { heads.continuation.yield(($0, nil)) },
                failure: { heads.continuation.yield(($0, $1)) }
            )
            api.head(
                "status/404",
                success: { heads.continuation.yield(($0, nil)) },
                failure: { heads.continuation.yield(($0, $1)) }
            )
            var outcomes: [(DataTask?, FerryError?)] = []
            for await outcome in heads.stream {
                outcomes.append(outcome)
                if outcomes.count == 2 { break }
            }
            let accepted = outcomes.first { $0.1 == nil }
            #expect(accepted?.0?.response?.headers["Content-Length"] == "100")
            #expect(outcomes.contains { $0.1?.reason == .unacceptableStatusCode(404) })

            let echo = try HTTPSessionManager(
                baseURL: URL(string: httpbin.url("/anything/")),
                responseSerializer: .decodable(HttpbinArgs.self)
            )
            let (reply, _) = try await echo.get("list", parameters: ["tag": ["a", "b"]])
            #expect(reply.args["tag[]"] == .many(["a", "b"]))
        }
    }

    @Test func getAndDeleteCarryParametersInTheQueryOthersInTheBody() throws {
        let api = try HTTPSessionManager(baseURL: URL(string: "http://api.example.com/"))
        let get = try api.request(.get, "search", parameters: ["q": "a b"])
        #expect(get.url?.absoluteString == "http://api.example.com/search?q=a+b")
        #expect(get.httpBody == nil)
        let post = try api.request(.post, "search", parameters: ["q": "a b"])
        #expect(post.url?.absoluteString == "http://api.example.com/search")
        #expect(post.httpBody.map { String(decoding: $0, as: UTF8.self) } == "q=a+b")
    }
}

/// httpbin's `args`: one value, or a list when a name repeats.
struct HttpbinArgs: Decodable, Sendable {
    enum Value: Decodable, Sendable, Equatable {
        case one(String)
        case many([String])

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let list = try? container.decode([String].self) {
                self = .many(list)
            } else {
                self = .one(try container.decode(String.self))
            }
        }
    }

    var args: [String: Value]
}
