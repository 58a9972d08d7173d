import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Redirects")
struct RedirectTests {
    @Test func followsAndReportsEachHop() async throws {
        try await withServer { server in
            let session = try makeSession()
            let task = session.dataTask(with: server.url("/redirect/3?to=/bytes/100"))
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(seen.filter { $0.name == "willRedirect" }.count == 3)
            #expect(task.response?.statusCode == 200)
            #expect(task.currentRequest.url == server.url("/bytes/100"))
            #expect(task.originalRequest.url == server.url("/redirect/3?to=/bytes/100"))
            #expect(task.receivedData == TestContent.data(size: 100))
        }
    }

    @Test func refusePolicyCompletesWithTheRedirect() async throws {
        try await withServer { server in
            let session = try makeSession { $0.redirectPolicy = .refuse }
            let (_, response) = try await session.data(from: server.url("/redirect/1"))
            #expect(response.statusCode == 302)
            #expect(response.headers["Location"] == "/bytes/16")
        }
    }

    @Test func perTaskModifyPolicy() async throws {
        try await withServer { server in
            let session = try makeSession()
            let task = session.dataTask(with: server.url("/redirect/1"))
            let target = server.url("/bytes/7")
            task.redirectPolicy = .modify { _, proposed in
                var changed = proposed
                changed.url = target
                return changed
            }
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            #expect(task.receivedData == TestContent.data(size: 7))
        }
    }

    @Test func tooManyRedirectsFail() async throws {
        try await withServer { server in
            let session = try makeSession { $0.maximumRedirects = 2 }
            await #expect {
                try await session.data(from: server.url("/redirect/3"))
            } throws: { error in
                (error as? FerryError)?.reason == .redirectFailed
            }
            let (data, _) = try await session.data(from: server.url("/redirect/2?to=/bytes/3"))
            #expect(data.count == 3)
        }
    }

    /// The redirect the limit refuses is not announced: no `willRedirect` for it, and the
    /// task's current request stays the last one sent; the error carries the refused response.
    @Test func aRefusedRedirectIsNeverAnnounced() async throws {
        try await withServer { server in
            let session = try makeSession { $0.maximumRedirects = 2 }
            let task = session.dataTask(with: server.url("/redirect/3"))
            let events = task.events
            task.resume()
            let seen = await collectEvents(events)
            #expect(seen.filter { $0.name == "willRedirect" }.count == 2)
            #expect(task.error?.reason == .redirectFailed)
            #expect(task.error?.response?.statusCode == 302)
            #expect(task.error?.response?.url == server.url("/redirect/1"))
            #expect(task.currentRequest.url == server.url("/redirect/1"))
            #expect(task.metrics?.transactions.count == 3)
            #expect(task.metrics?.redirectCount == 2)
        }
    }

    @Test func postBecomesGetOn303AndKeepsBodyOn307() async throws {
        try await withServer { server in
            struct Echo: Decodable {
                var method: String
                var body: String
            }
            let session = try makeSession()
            var see = URLRequest(url: server.url("/redirect-to?status=303&url=/echo"), method: .post)
            see.httpBody = Data("payload".utf8)
            let (seeData, _) = try await session.data(for: see)
            let seeEcho = try JSONDecoder().decode(Echo.self, from: seeData)
            #expect(seeEcho.method == "GET")
            #expect(seeEcho.body.isEmpty)
            var temporary = URLRequest(url: server.url("/redirect-to?status=307&url=/echo"), method: .post)
            temporary.httpBody = Data("payload".utf8)
            let (tempData, _) = try await session.data(for: temporary)
            let tempEcho = try JSONDecoder().decode(Echo.self, from: tempData)
            #expect(tempEcho.method == "POST")
            #expect(tempEcho.body == "payload")
            // A file body is produced again for the 307.
            let file = try makeTemporaryDirectory().appendingPathComponent("f")
            try Data("from file".utf8).write(to: file)
            let (fileData, _) = try await session.upload(
                for: URLRequest(url: server.url("/redirect-to?status=308&url=/echo"), method: .put),
                fromFile: file
            )
            #expect(try JSONDecoder().decode(Echo.self, from: fileData).body == "from file")
        }
    }

    @Test func oneShotStreamCannotFollowA307() async throws {
        try await withServer { server in
            let session = try makeSession()
            let stream = AsyncStream<Data> { continuation in
                continuation.yield(Data("once".utf8))
                continuation.finish()
            }
            await #expect {
                try await session.upload(
                    for: URLRequest(url: server.url("/redirect-to?status=307&url=/echo"), method: .post),
                    fromStream: stream,
                    length: 4
                )
            } throws: { error in
                (error as? FerryError)?.reason == .bodyNotReplayable
            }
        }
    }

    @Test func credentialsAreNotSentToAnotherOrigin() async throws {
        try await withServer { first in
            try await withServer { second in
                struct Echo: Decodable { var headers: [[String]] }
                let session = try makeSession()
                var request = URLRequest(url: first.url("/redirect-to?url=\(second.url("/echo").absoluteString)"))
                request.setBasicAuthorization(username: "a", password: "b")
                let (data, _) = try await session.data(for: request)
                let names = try JSONDecoder().decode(Echo.self, from: data).headers.map { $0[0].lowercased() }
                #expect(!names.contains("authorization"))
            }
        }
    }

    @Test func redirectLoopsEndWithAClearError() async throws {
        try await withServer { server in
            let session = try makeSession { $0.maximumRedirects = 50 }
            do {
                _ = try await session.data(from: server.url("/loop/a"))
                Issue.record("a redirect loop completed")
            } catch let error as FerryError {
                #expect(error.reason == .redirectFailed)
                #expect(error.message.contains("loop"))
            }
            // Well before the hop limit.
            #expect(server.requests(to: "/loop").count < 10)
        }
    }
}
