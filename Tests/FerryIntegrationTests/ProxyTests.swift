import Ferry
import FerryTestServer
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Proxies")
struct ProxyTests {
    @Test func connectProxyCarriesRequestsAndItsCredential() async throws {
        try await withServer { server in
            let proxy = try await TunnelProxy.start(.httpConnect(requiredAuthorization: "Basic cDpx"))  // p:q
            defer { Task { await proxy.shutdown() } }
            let session = try makeSession {
                $0.proxy = .http(host: "127.0.0.1", port: proxy.port, credential: Credential(user: "p", password: "q"))
            }
            let (data, response) = try await session.data(from: server.url("/bytes/2000"))
            #expect(response.statusCode == 200)
            #expect(data == TestContent.data(size: 2000))
            #expect(
                proxy.tunnels == [.init(target: "127.0.0.1:\(server.port)", authorization: "Basic cDpx", opened: true)]
            )
            // Without the credential the proxy refuses, and the task fails clearly.
            let refused = try makeSession { $0.proxy = .http(host: "127.0.0.1", port: proxy.port) }
            await #expect(throws: FerryError.self) { try await refused.data(from: server.url("/bytes/1")) }
            #expect(proxy.tunnels.last?.opened == false)
        }
    }

    @Test func theProxysChallengeGoesToTheDelegateThenTheStore() async throws {
        try await withServer { server in
            let proxy = try await TunnelProxy.start(.httpConnect(requiredAuthorization: "Basic cDpx"))  // p:q
            defer { Task { await proxy.shutdown() } }
            // No credential configured: the delegate answers the 407.
            let delegate = ProxyChallengeDelegate(answer: Credential(user: "p", password: "q"))
            let session = try makeSession(delegate: delegate) { $0.proxy = .http(host: "127.0.0.1", port: proxy.port) }
            let (data, _) = try await session.data(from: server.url("/bytes/3000"))
            #expect(data == TestContent.data(size: 3000))
            let asked = try #require(delegate.spaces.first)
            #expect(asked.isProxy)
            #expect(asked.host == "127.0.0.1" && asked.port == proxy.port)
            #expect(asked.realm == "proxy")
            #expect(asked.authenticationMethod == .basic)
            #expect(proxy.tunnels.map(\.opened) == [false, true])
            // A refused credential is not answered forever: the task fails with the 407.
            let wrong = ProxyChallengeDelegate(answer: Credential(user: "p", password: "wrong"))
            let refused = try makeSession(delegate: wrong) { $0.proxy = .http(host: "127.0.0.1", port: proxy.port) }
            await #expect {
                try await refused.data(from: server.url("/bytes/1"))
            } throws: { error in
                (error as? FerryError)?.reason == .unacceptableStatusCode(407)
            }
            #expect(wrong.spaces.count == 5)
            // Without a delegate, the credential store answers for the proxy's space.
            let store = CredentialStore()
            try store.set(
                Credential(user: "p", password: "q"),
                for: ProtectionSpace(
                    scheme: "http",
                    host: "127.0.0.1",
                    port: proxy.port,
                    realm: "proxy",
                    authenticationMethod: .basic,
                    isProxy: true
                )
            )
            let stored = try makeSession {
                $0.proxy = .http(host: "127.0.0.1", port: proxy.port)
                $0.credentialStore = store
            }
            #expect(try await stored.data(from: server.url("/bytes/10")).0.count == 10)
        }
    }

    @Test func socks5ProxyAndBypass() async throws {
        try await withServer { server in
            let proxy = try await TunnelProxy.start(.socks5)
            defer { Task { await proxy.shutdown() } }
            let session = try makeSession { $0.proxy = .socks5(host: "127.0.0.1", port: proxy.port) }
            let target = try makeTemporaryDirectory().appendingPathComponent("d")
            _ = try await session.download(from: server.url("/bytes/100000"), to: .file(target))
            #expect(try await sha256(of: target) == TestContent.sha256(size: 100_000))
            #expect(proxy.tunnels.map(\.target) == ["127.0.0.1:\(server.port)"])
            let direct = try makeSession {
                $0.proxy = .socks5(host: "127.0.0.1", port: proxy.port, bypass: ["127.0.0.1"])
            }
            _ = try await direct.data(from: server.url("/bytes/10"))
            #expect(proxy.tunnels.count == 1)
        }
    }

    @Test func environmentFollowsCurlsRules() throws {
        let http = try #require(URL(string: "http://api.example.com/x"))
        let https = try #require(URL(string: "https://api.example.com/x"))
        let env = [
            "http_proxy": "proxy:3128", "HTTPS_PROXY": "socks5h://u:p%40ss@sock:9050",
            "no_proxy": ".internal, localhost",
        ]
        #expect(
            Proxy.fromEnvironment(env, for: http)
                == .http(host: "proxy", port: 3128, bypass: [".internal", " localhost"])
        )
        let socks = try #require(Proxy.fromEnvironment(env, for: https))
        #expect(socks.kind == .socks5 && socks.host == "sock" && socks.port == 9050)
        // Uppercase HTTP_PROXY is ignored for http (CGI sets it from a request header).
        #expect(Proxy.fromEnvironment(["HTTP_PROXY": "evil:1"], for: http) == nil)
        #expect(Proxy.fromEnvironment(env, for: try #require(URL(string: "http://a.internal/"))) == nil)
        #expect(Proxy.fromEnvironment(["all_proxy": "p:1", "no_proxy": "*"], for: http) == nil)
        #expect(Proxy(address: "ftp://x:1") == nil)
    }

    @Test func cliUsesTheEnvironmentAndDashX() async throws {
        try await withServer { server in
            let proxy = try await TunnelProxy.start(.httpConnect(requiredAuthorization: nil))
            defer { Task { await proxy.shutdown() } }
            let out = try makeTemporaryDirectory("proxy").appendingPathComponent("f")
            let viaOption = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-x", "127.0.0.1:\(proxy.port)", "-o", out.path, server.url("/bytes/300").absoluteString]
            )
            #expect(viaOption.status == 0)
            #expect(proxy.tunnels.count == 1)
            let bypassed = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "-q", "-x", "127.0.0.1:\(proxy.port)", "--noproxy", "127.0.0.1", "-o", out.path,
                    server.url("/bytes/300").absoluteString,
                ]
            )
            #expect(bypassed.status == 0)
            #expect(proxy.tunnels.count == 1)
        }
    }
}

/// Answers proxy challenges with one credential and keeps what it was asked.
final class ProxyChallengeDelegate: SessionDelegate {
    let answer: Credential
    private let asked = Mutex<[ProtectionSpace]>([])

    init(answer: Credential) { self.answer = answer }

    var spaces: [ProtectionSpace] { asked.withLock { $0 } }

    func session(
        _ session: Session,
        task: SessionTask,
        didReceive challenge: AuthenticationChallenge
    ) async -> ChallengeDisposition {
        guard challenge.protectionSpace.isProxy else { return .performDefaultHandling }
        asked.withLock { $0.append(challenge.protectionSpace) }
        return .useCredential(answer)
    }
}
