import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Defect 5 of "every call comes back": a data task's `Upgrade` connected straight to the
/// origin whatever the session said. It now goes as the session's other requests go: through
/// its proxy, over TLS it verifies (the delegate's trust challenge), answering `401`s,
/// following redirects, and sending `httpBodyStream`. The servers are websockets (PyPI),
/// tinyproxy, microsocks and httpbin on gunicorn.
@Suite(
    "An upgrade goes through the session",
    .serialized,
    .enabled(if: WebSocketEcho.enabled && Tinyproxy.enabled && Microsocks.enabled)
)
struct UpgradeThroughTheSessionTests {
    /// The upgrade's stream task, after checking it echoes a frame and that the data task's
    /// metrics hold one transaction per hop, for `reasons`, the last one the switch.
    private func upgraded(
        _ session: Session,
        _ request: URLRequest,
        reasons: [TransactionMetrics.Reason] = [.initial]
    ) async throws -> StreamTask {
        let task = session.dataTask(with: request)
        let seen = await resumeCollectingEvents(task)
        #expect(task.error == nil, "\(String(describing: task.error))")
        #expect(task.response?.statusCode == 101)
        let transactions = task.metrics?.transactions ?? []
        #expect(transactions.map(\.reason) == reasons)
        #expect(transactions.last?.response?.statusCode == 101)
        #expect(transactions.allSatisfy { $0.networkProtocolName == "http/1.1" && $0.responseStartDate != nil })
        #expect(transactions.allSatisfy { $0.connectStartDate != nil && $0.isReusedConnection == false })
        // Over TLS, the handshake's dates, whoever made it (the session's bridge here).
        if request.url?.scheme == "https" { #expect(transactions.last?.secureConnectionEndDate != nil) }
        guard case .becameStreamTask(let stream) = seen.first(where: { $0.name == "becameStreamTask" }) else {
            throw FerryError(.badServerResponse, "The data task did not become a stream task.")
        }
        try await stream.write(WebSocketEcho.frame("through the session"), timeout: 10)
        let (echo, _) = try await stream.read(minLength: 21, maxLength: 21, timeout: 10)
        #expect(echo == Data([0x81, 19] + Array("through the session".utf8)))
        return stream
    }

    @Test func anUpgradeGoesThroughTheSessionsHTTPProxy() async throws {
        let server = try await WebSocketEcho.start()
        defer { server.stop() }
        let proxy = try await Tinyproxy()
        defer { proxy.stop() }
        let session = try makeSession { $0.proxy = .http(host: "127.0.0.1", port: proxy.port) }
        let stream = try await upgraded(session, WebSocketEcho.upgradeRequest(port: server.port))
        // The stream's bytes travel through the proxy: its connection is there while the
        // stream is open (before, the upgrade went straight to the origin: none).
        #expect(await establishedConnections(toPort: proxy.port, atLeast: 1))
        stream.cancel()
        #expect(await completion(of: stream)?.reason == .cancelled)
    }

    @Test func anUpgradeGoesThroughTheSessionsSOCKS5Proxy() async throws {
        let server = try await WebSocketEcho.start()
        defer { server.stop() }
        // With a credential (the session's own bridge speaks SOCKS5) and without one (where
        // AsyncHTTPClient speaks it for requests, and a bridge is made for the upgrade).
        for credential in [Credential(user: "ada", password: "s3cret"), nil] {
            let socks = try await Microsocks(user: credential?.user, password: credential?.password)
            defer { socks.stop() }
            let session = try makeSession {
                $0.proxy = .socks5(host: "127.0.0.1", port: socks.port, credential: credential)
            }
            let stream = try await upgraded(session, WebSocketEcho.upgradeRequest(port: server.port))
            #expect(await establishedConnections(toPort: socks.port, atLeast: 1), "credential: \(credential != nil)")
            stream.cancel()
            _ = await completion(of: stream)
        }
    }

    @Test func anUpgradeAnswersTheServersBasicChallenge() async throws {
        let server = try await WebSocketEcho.start(["--basic", "ada:s3cret"])
        defer { server.stop() }
        // Without credentials: the 401 is the task's response.
        let (_, refused) = try await makeSession().data(for: WebSocketEcho.upgradeRequest(port: server.port))
        #expect(refused.statusCode == 401)
        // With them: answered, then upgraded.
        let session = try makeSession { $0.credential = Credential(user: "ada", password: "s3cret") }
        let stream = try await upgraded(
            session,
            WebSocketEcho.upgradeRequest(port: server.port),
            reasons: [.initial, .authentication]
        )
        stream.cancel()
        _ = await completion(of: stream)
    }

    @Test func anUpgradeFollowsARedirect() async throws {
        let server = try await WebSocketEcho.start(["--redirect-from", "/old"])
        defer { server.stop() }
        var request = WebSocketEcho.upgradeRequest(port: server.port)
        request.url = URL(string: "http://127.0.0.1:\(server.port)/old")
        let stream = try await upgraded(try makeSession(), request, reasons: [.initial, .redirect])
        stream.cancel()
        _ = await completion(of: stream)
        // A session that refuses redirects gets the 302.
        let refusing = try makeSession { $0.redirectPolicy = .refuse }
        let (_, response) = try await refusing.data(for: request)
        #expect(response.statusCode == 302)
        // The request loop's cap holds for an upgrade as for any request: one driver runs it.
        let capped = try makeSession { $0.maximumRedirects = 0 }
        let task = capped.dataTask(with: request)
        _ = await resumeCollectingEvents(task)
        #expect(task.error?.reason == .redirectFailed, "\(String(describing: task.error))")
        #expect(task.error?.description.contains("maximumRedirects") == true)
    }

    @Test func anUpgradeOverTLSAsksTheDelegateAboutTrust() async throws {
        let ca = try TestPKI(name: "Ferry Upgrade CA \(UUID().uuidString.prefix(8))")
        let directory = try makeTemporaryDirectory("wss")
        defer { try? FileManager.default.removeItem(at: directory) }
        let identity = try ca.issueServerIdentity(for: ["127.0.0.1"])
        let (certificate, key) = try identity.writePEMFiles(in: directory)
        let server = try await WebSocketEcho.start(["--tls", certificate.path, key.path])
        defer { server.stop() }
        var request = WebSocketEcho.upgradeRequest(port: server.port)
        request.url = URL(string: "https://127.0.0.1:\(server.port)/")

        // The delegate trusts the server's key, which no root vouches for.
        let byKey = TrustDelegate { $0.publicKeySHA256.first == identity.publicKeyPin ? .trust : .cancel }
        let trusting = try makeSession(delegate: byKey) { $0.tls.delegateEvaluatesServerTrust = true }
        let stream = try await upgraded(trusting, request)
        stream.cancel()
        _ = await completion(of: stream)
        #expect(byKey.challenges.count == 1)
        #expect(byKey.challenges.first?.port == server.port)

        // The delegate refuses a chain the roots trust: the upgrade fails with its reason.
        let refusing = try makeSession(delegate: TrustDelegate { _ in .cancel }) {
            $0.tls.delegateEvaluatesServerTrust = true
            $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
        }
        await #expect {
            _ = try await refusing.data(for: request)
        } throws: { error in
            let error = error as? FerryError
            return error?.reason == .secureConnectionFailed && error?.message.contains("delegate") == true
        }
    }

    /// httpbin does not switch protocols: it answers the upgrade request as any other, and
    /// echoes the body it read. Known length and unknown (sent chunked); the body counts in the
    /// task's bytes sent and its metrics. (Werkzeug refuses
    /// a `websocket` upgrade it cannot serve with a 400, so another protocol is asked for.)
    @Test(.enabled(if: Httpbin.enabled)) func anUpgradesBodyStreamIsSent() async throws {
        try await withHttpbin { httpbin in
            let session = try makeSession()
            let body = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
            for knownLength in [true, false] {
                var request = URLRequest(url: URL(string: httpbin.url("/anything"))!, method: .post)
                request.setValue("echo", forHTTPHeaderField: "Upgrade")
                request.setValue("Upgrade", forHTTPHeaderField: "Connection")
                request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
                if knownLength { request.setValue("\(body.count)", forHTTPHeaderField: "Content-Length") }
                request.httpBodyStream = InputStream(data: body)
                let task = session.dataTask(with: request)
                task.resume()
                #expect(await completion(of: task) == nil)
                let (data, response) = (try #require(task.receivedData), try #require(task.response))
                #expect(response.statusCode == 200)
                // Counted as a request's body is: the task's bytes sent and its transaction.
                #expect(task.countOfBytesSent == Int64(body.count))
                let transaction = try #require(task.metrics?.transactions.first)
                #expect(transaction.countOfRequestBodyBytesSent == Int64(body.count))
                #expect(transaction.countOfResponseBodyBytesReceived == Int64(data.count))
                #expect(transaction.remoteAddress == "127.0.0.1")
                let echoed = try JSONSerialization.jsonObject(with: data) as? [String: Any]
                let sent = (echoed?["data"] as? String).flatMap {
                    Data(base64Encoded: String($0.dropFirst("data:application/octet-stream;base64,".count)))
                }
                #expect(sent == body, "known length: \(knownLength)")
            }
        }
    }
}
