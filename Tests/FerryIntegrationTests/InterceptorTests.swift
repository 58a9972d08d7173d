import Ferry
import FerryTestServer
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A bearer token that the test server accepts only once refreshed.
struct TokenAuthenticator: Authenticator {
    let refreshes = MutexBox(0)
    let fresh: String
    let delay: Duration
    let fails: Bool

    init(fresh: String = "new", delay: Duration = .milliseconds(200), fails: Bool = false) {
        self.fresh = fresh
        self.delay = delay
        self.fails = fails
    }

    func apply(_ credential: String, to request: inout URLRequest) {
        request.setValue("Bearer \(credential)", forHTTPHeaderField: "Authorization")
    }

    func refresh(_ credential: String, for session: Session) async throws -> String {
        refreshes.mutate { $0 += 1 }
        try await Task.sleep(for: delay)
        if fails { throw FerryError(.network, "the token service is down") }
        return fresh
    }

    func isRequest(_ request: URLRequest, authenticatedWith credential: String) -> Bool {
        request.value(forHTTPHeaderField: "Authorization") == "Bearer \(credential)"
    }
}

@Suite("Request interceptors")
struct InterceptorTests {
    @Test func oneRefreshServesTenWaitingRequests() async throws {
        try await withServer { server in
            let authenticator = TokenAuthenticator()
            let interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: "old")
            let session = try makeSession {
                $0.interceptor = interceptor
                $0.httpMaximumConnectionsPerHost = 10
            }
            // The server refuses "old" after 300 ms, so all ten are in flight with it.
            let url = server.url("/bearer/new?delay=300")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<10 { group.addTask { try await session.data(from: url).1.statusCode } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 10))
            #expect(authenticator.refreshes.value == 1)
            #expect(interceptor.credential == "new")
            let sent = server.requests(to: "/bearer").map { $0.headers["authorization"] ?? "" }
            #expect(sent.filter { $0 == "Bearer old" }.count == 10)
            #expect(sent.filter { $0 == "Bearer new" }.count == 10)
            // Later requests go out with the new token at once.
            let (_, later) = try await session.data(from: url)
            #expect(later.statusCode == 200)
            #expect(authenticator.refreshes.value == 1)
        }
    }

    @Test func aFailedRefreshDeliversTheRefusal() async throws {
        try await withServer { server in
            let authenticator = TokenAuthenticator(delay: .milliseconds(10), fails: true)
            let session = try makeSession {
                $0.interceptor = AuthenticationInterceptor(authenticator: authenticator, credential: "old")
            }
            let (body, response) = try await session.data(from: server.url("/bearer/new"))
            #expect(response.statusCode == 401)
            #expect(String(decoding: body, as: UTF8.self) == "token required\n")
            #expect(authenticator.refreshes.value == 1)
        }
    }

    /// An interceptor that adds a header, and retries a 503 twice and a refused connection once.
    struct Flaky: RequestInterceptor {
        let seen = MutexBox<[String]>([])

        func adapt(_ request: URLRequest, for session: Session) async throws -> URLRequest {
            var request = request
            request.setValue("yes", forHTTPHeaderField: "X-Adapted")
            return request
        }

        func retry(
            _ request: URLRequest,
            for session: Session,
            dueTo failure: RequestFailure,
            attemptCount: Int
        ) async -> RetryDecision {
            switch failure {
            case .response(let response):
                seen.mutate { $0.append("\(response.statusCode)#\(attemptCount)") }
                return attemptCount < 2 ? .retryWithDelay(.milliseconds(10)) : .doNotRetry
            case .error(let error):
                seen.mutate { $0.append("error \(error.reason)#\(attemptCount)") }
                return attemptCount < 1 ? .retry : .doNotRetry
            }
        }
    }

    @Test func adaptsEveryRequestAndRetriesAsTold() async throws {
        try await withServer { server in
            let interceptor = Flaky()
            let session = try makeSession { $0.interceptor = interceptor }
            let (_, response) = try await session.data(from: server.url("/status/503"))
            #expect(response.statusCode == 503)
            #expect(interceptor.seen.value == ["503#0", "503#1", "503#2"])
            let sent = server.requests(to: "/status/503")
            #expect(sent.count == 3)
            #expect(sent.allSatisfy { $0.headers["x-adapted"] == "yes" })
            // A download's range requests are adapted too.
            let target = try makeTemporaryDirectory().appendingPathComponent("d")
            _ = try await session.download(from: server.url("/bytes/1000"), to: .file(target))
            #expect(server.requests(to: "/bytes/1000").last?.headers["x-adapted"] == "yes")
        }
        // Nothing listens on a fresh closed port: the error goes to the interceptor, once.
        let interceptor = Flaky()
        let session = try makeSession { $0.interceptor = interceptor }
        let closed = try #require(URL(string: "http://127.0.0.1:9/nothing"))
        await #expect(throws: FerryError.self) { try await session.data(from: closed) }
        #expect(interceptor.seen.value.count == 2)
        #expect(interceptor.seen.value.allSatisfy { $0.hasPrefix("error") })
    }
}
