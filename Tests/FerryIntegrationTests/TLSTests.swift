import Ferry
import FerryTestServer
import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Starts an HTTPS FerryTestServer with a certificate from a CA made for this test.
func withTLSServer<Result>(
    requireClientCertificatesFrom clientCA: String? = nil,
    _ body: (FerryTestServer, TestPKI) async throws -> Result
) async throws -> Result {
    try await withTLSServer(requireClientCertificatesFrom: clientCA) { server, ca, _ in try await body(server, ca) }
}

/// Starts an HTTPS FerryTestServer with a certificate from a CA made for this test, and
/// passes the server's identity too.
func withTLSServer<Result>(
    requireClientCertificatesFrom clientCA: String? = nil,
    _ body: (FerryTestServer, TestPKI, TestPKI.Identity) async throws -> Result
) async throws -> Result {
    let ca = try TestPKI(name: "Ferry Test CA \(UUID().uuidString.prefix(8))")
    let identity = try ca.issueServerIdentity(for: ["127.0.0.1", "localhost"])
    let server = try await FerryTestServer.start(tls: identity, requireClientCertificatesFrom: clientCA)
    do {
        let result = try await body(server, ca, identity)
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

@Suite("TLS trust and pinning")
struct TLSTests {
    @Test func validationIsOnAndCustomRootsAreTrusted() async throws {
        try await withTLSServer { server, ca in
            // The system does not know the test CA: refused, with a clear reason.
            let strict = try makeSession()
            await #expect {
                try await strict.data(from: server.url("/bytes/10"))
            } throws: { error in
                (error as? FerryError)?.reason == .secureConnectionFailed
            }
            let trusting = try makeSession { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
            let (data, response) = try await trusting.data(from: server.url("/bytes/1000"))
            #expect(response.statusCode == 200)
            #expect(data == TestContent.data(size: 1000))
            // A certificate for another name is refused even from a trusted CA.
            let other = try makeSession { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
            let wrongName = try #require(URL(string: "https://127.0.0.2:\(server.port)/bytes/1"))
            await #expect(throws: FerryError.self) { try await other.data(from: wrongName) }
        }
    }

    @Test func aPinnedCertificateIsAcceptedAndAnotherRefused() async throws {
        try await withTLSServer { server, ca in
            let stranger = try TestPKI(name: "Some Other CA")
            let pinned = try makeSession {
                $0.tls.trustRoots = .systemAnd(pem: stranger.certificatePEM)
                $0.tls.pinnedCertificates["127.0.0.1"] = ca.certificatePEM
            }
            let (_, response) = try await pinned.data(from: server.url("/bytes/10"))
            #expect(response.statusCode == 200)
            // Trusted by the roots, but not the pin: refused.
            let mismatch = try makeSession {
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
                $0.tls.pinnedCertificates["127.0.0.1"] = stranger.certificatePEM
            }
            await #expect {
                try await mismatch.data(from: server.url("/bytes/10"))
            } throws: { error in
                (error as? FerryError)?.reason == .secureConnectionFailed
            }
            // Invalid PEM is refused when the session is made, not at the first connection.
            #expect(throws: FerryError.self) {
                try makeSession { $0.tls.pinnedCertificates["x"] = "not a certificate" }
            }
        }
    }

    @Test func publicKeyPinsOfTheServerOrItsCAAreAcceptedAndOthersRefused() async throws {
        try await withTLSServer { server, ca, identity in
            func session(pins: Set<String>, roots: TLSOptions.TrustRoots) throws -> Session {
                try makeSession {
                    $0.tls.trustRoots = roots
                    $0.tls.pinnedPublicKeys["127.0.0.1"] = pins
                }
            }
            let trusted = TLSOptions.TrustRoots.custom(pem: ca.certificatePEM)
            // The server's own key: a megabyte down and a body up, intact through the bridge.
            let leaf = try session(pins: [identity.publicKeyPin], roots: trusted)
            let (data, response) = try await leaf.data(from: server.url("/bytes/1048576"))
            #expect(response.statusCode == 200)
            #expect(data.count == 1_048_576)
            // A Bool, not the Data: Swift Testing would diff a megabyte byte by byte.
            let intact = data == TestContent.data(size: 1_048_576)
            #expect(intact)
            var post = URLRequest(url: server.url("/sink"))
            post.httpMethod = "POST"
            let (reply, _) = try await leaf.upload(for: post, from: TestContent.data(size: 300_000))
            let sink = try JSONDecoder().decode(SinkReport.self, from: reply)
            #expect(sink.bytes == 300_000)
            #expect(sink.sha256 == TestContent.sha256(size: 300_000))
            // The CA's key, in curl's notation.
            let caPinned = try session(pins: ["sha256//" + ca.publicKeyPin], roots: trusted)
            #expect(try await caPinned.data(from: server.url("/bytes/10")).1.statusCode == 200)
            // Another key: refused, and the error says why.
            let stranger = try TestPKI(name: "Some Other CA")
            let wrong = try session(pins: [stranger.publicKeyPin], roots: trusted)
            await #expect {
                try await wrong.data(from: server.url("/bytes/10"))
            } throws: { error in
                let error = error as? FerryError
                return error?.reason == .secureConnectionFailed && error?.message.contains("pinned") == true
            }
            // The right key on a chain the roots do not trust: refused too.
            let untrusted = try session(pins: [identity.publicKeyPin], roots: .system)
            await #expect {
                try await untrusted.data(from: server.url("/bytes/10"))
            } throws: { error in
                (error as? FerryError)?.reason == .secureConnectionFailed
            }
            #expect(throws: FerryError.self) { try session(pins: ["not base64 at all"], roots: trusted) }
        }
    }

    /// `allowsInvalidCertificates` (curl's -k) turns certificate checks off, never pins: a
    /// key pin must still be the server's own key (the leaf's: with no checked chain, a CA
    /// key proves nothing), and a certificate pin still needs the chain to lead to it.
    @Test("13.2: -k (allowsInvalidCertificates) never turns pins off")
    func allowingInvalidCertificatesNeverTurnsPinsOff() async throws {
        try await withTLSServer { server, ca, identity in
            let stranger = try TestPKI(name: "Not the server's CA")
            func session(keys: Set<String> = [], certificate: String? = nil) throws -> Session {
                try makeSession {
                    $0.tls.allowsInvalidCertificates = true
                    if !keys.isEmpty { $0.tls.pinnedPublicKeys["127.0.0.1"] = keys }
                    if let certificate { $0.tls.pinnedCertificates["127.0.0.1"] = certificate }
                }
            }
            let refused: @Sendable (any Error) -> Bool = { ($0 as? FerryError)?.reason == .secureConnectionFailed }
            // No pins: anything goes (the chain is not trusted by any root here).
            #expect(try await session().data(from: server.url("/bytes/10")).1.statusCode == 200)
            // The server's own key: accepted.
            let leaf = try session(keys: [identity.publicKeyPin])
            #expect(try await leaf.data(from: server.url("/bytes/10")).1.statusCode == 200)
            // Another key, or a CA's key on an unchecked chain: refused.
            await #expect(
                performing: { try await session(keys: [stranger.publicKeyPin]).data(from: server.url("/")) },
                throws: refused
            )
            await #expect(
                performing: { try await session(keys: [ca.publicKeyPin]).data(from: server.url("/")) },
                throws: refused
            )
            // Certificate pins: the chain must lead to the pinned certificate, -k or not.
            let pinnedCA = try session(certificate: ca.certificatePEM)
            #expect(try await pinnedCA.data(from: server.url("/bytes/10")).1.statusCode == 200)
            await #expect(
                performing: { try await session(certificate: stranger.certificatePEM).data(from: server.url("/")) },
                throws: refused
            )
        }
    }

    @Test func publicKeyPinsWorkThroughConnectAndSOCKSProxies() async throws {
        try await withTLSServer { server, ca, identity in
            let connect = try await TunnelProxy.start(.httpConnect(requiredAuthorization: "Basic cDpx"))  // p:q
            let socks = try await TunnelProxy.start(.socks5)
            defer {
                Task {
                    await connect.shutdown()
                    await socks.shutdown()
                }
            }
            for proxy in [
                Proxy.http(host: "127.0.0.1", port: connect.port, credential: Credential(user: "p", password: "q")),
                Proxy.socks5(host: "127.0.0.1", port: socks.port),
            ] {
                let pinned = try makeSession {
                    $0.proxy = proxy
                    $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
                    $0.tls.pinnedPublicKeys["127.0.0.1"] = [identity.publicKeyPin]
                }
                let (data, response) = try await pinned.data(from: server.url("/bytes/200000"))
                #expect(response.statusCode == 200)
                #expect(data.count == 200_000)
                let wrong = try makeSession {
                    $0.proxy = proxy
                    $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
                    $0.tls.pinnedPublicKeys["127.0.0.1"] = [ca.publicKeyPin.reversedBase64]
                }
                await #expect {
                    try await wrong.data(from: server.url("/bytes/10"))
                } throws: { error in
                    (error as? FerryError)?.reason == .secureConnectionFailed
                }
            }
            // Both tunnels were used, to the server.
            #expect(connect.tunnels.first?.target == "127.0.0.1:\(server.port)")
            #expect(connect.tunnels.first?.authorization == "Basic cDpx")
            #expect(socks.tunnels.first?.target == "127.0.0.1:\(server.port)")
            // A proxy that refuses the tunnel: a clear failure, not a hang.
            let refusing = try makeSession {
                $0.proxy = .http(host: "127.0.0.1", port: connect.port)
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
                $0.tls.pinnedPublicKeys["127.0.0.1"] = [identity.publicKeyPin]
            }
            await #expect(throws: FerryError.self) { try await refusing.data(from: server.url("/bytes/10")) }
        }
    }

    @Test func theDelegateEvaluatesServerTrust() async throws {
        try await withTLSServer { server, ca, identity in
            // Trusts the server's key whatever the roots say: a device's self-signed certificate.
            let byKey = TrustDelegate { $0.publicKeySHA256.first == identity.publicKeyPin ? .trust : .cancel }
            let session = try makeSession(delegate: byKey) { $0.tls.delegateEvaluatesServerTrust = true }
            for _ in 0..<3 {
                #expect(try await session.data(from: server.url("/bytes/100")).0 == TestContent.data(size: 100))
            }
            let asked = byKey.challenges
            // One connection, reused: asked once.
            #expect(asked.count == 1)
            #expect(asked.first?.host == "127.0.0.1")
            #expect(asked.first?.port == server.port)
            #expect(asked.first?.certificates.count == 1)
            #expect(asked.first?.defaultEvaluationError != nil)

            // Default handling keeps the session's verdict: trusted roots pass...
            let neutral = TrustDelegate { _ in .performDefaultHandling }
            let withRoots = try makeSession(delegate: neutral) {
                $0.tls.delegateEvaluatesServerTrust = true
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
            }
            #expect(try await withRoots.data(from: server.url("/bytes/1")).1.statusCode == 200)
            #expect(neutral.challenges.first?.defaultEvaluationError == nil)
            // ...and the system's refuse.
            let withoutRoots = try makeSession(delegate: neutral) { $0.tls.delegateEvaluatesServerTrust = true }
            await #expect(throws: FerryError.self) { try await withoutRoots.data(from: server.url("/bytes/1")) }

            // Cancel refuses even a chain the roots trust.
            let refusing = try makeSession(delegate: TrustDelegate { _ in .cancel }) {
                $0.tls.delegateEvaluatesServerTrust = true
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
            }
            await #expect {
                try await refusing.data(from: server.url("/bytes/1"))
            } throws: { error in
                let error = error as? FerryError
                return error?.reason == .secureConnectionFailed && error?.message.contains("delegate") == true
            }
        }
    }

    @Test func httpsToHttpRedirectIsRefused() async throws {
        try await withTLSServer { tlsServer, ca in
            try await withServer { plain in
                let session = try makeSession { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
                var components = URLComponents(url: tlsServer.url("/redirect-to"), resolvingAgainstBaseURL: false)
                components?.queryItems = [URLQueryItem(name: "url", value: plain.url("/bytes/10").absoluteString)]
                let url = try #require(components?.url)
                await #expect {
                    try await session.data(from: url)
                } throws: { error in
                    (error as? FerryError)?.reason == .redirectFailed
                }
                #expect(plain.requests.isEmpty)
                // Same origin over https: followed, and the Authorization header kept.
                var request = URLRequest(url: tlsServer.url("/redirect-to?url=/echo"))
                request.setValue("Bearer t", forHTTPHeaderField: "Authorization")
                let (data, _) = try await session.data(for: request)
                #expect(String(decoding: data, as: UTF8.self).contains("Bearer t"))
            }
        }
    }

    @Test func clientCertificateWhenTheServerAsks() async throws {
        let clientCA = try TestPKI(name: "Client CA")
        let identity = try clientCA.issueServerIdentity(for: ["ferry-client"], clientAuth: true)
        try await withTLSServer(requireClientCertificatesFrom: clientCA.certificatePEM) { server, ca in
            let anonymous = try makeSession { $0.tls.trustRoots = .custom(pem: ca.certificatePEM) }
            await #expect(throws: FerryError.self) { try await anonymous.data(from: server.url("/bytes/1")) }
            let identified = try makeSession {
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
                $0.tls.clientIdentity = .init(
                    certificateChainPEM: identity.certificatePEM,
                    privateKeyPEM: identity.privateKeyPEM
                )
            }
            let (_, response) = try await identified.data(from: server.url("/bytes/1"))
            #expect(response.statusCode == 200)
        }
    }
}

@Suite("ferry over TLS (the real executable)")
struct TLSCLITests {
    @Test func cacertPinAndTheirFailures() async throws {
        try await withTLSServer { server, ca in
            let scratch = try makeTemporaryDirectory("tls-cli")
            let caFile = scratch.appendingPathComponent("ca.pem")
            try Data(ca.certificatePEM.utf8).write(to: caFile)
            let otherFile = scratch.appendingPathComponent("other.pem")
            try Data(try TestPKI(name: "Other").certificatePEM.utf8).write(to: otherFile)
            let url = server.url("/bytes/50").absoluteString
            let untrusted = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q", url])
            #expect(untrusted.status == 60)
            let trusted = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q", "--cacert", caFile.path, url])
            #expect(trusted.status == 0)
            #expect(trusted.stdout == TestContent.data(size: 50))
            let pinned = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-q", "--pin", caFile.path, url])
            #expect(pinned.status == 0)
            let wrongPin = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--cacert", caFile.path, "--pin", otherFile.path, url]
            )
            #expect(wrongPin.status == 60)
            // Public keys, curl's notation: the server's passes, another fails.
            let other = try TestPKI(name: "Other key")
            let keyPinned = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "-q", "--cacert", caFile.path, "--pin",
                    "sha256//\(other.publicKeyPin);sha256//\(ca.publicKeyPin)", url,
                ]
            )
            #expect(keyPinned.status == 0)
            #expect(keyPinned.stdout == TestContent.data(size: 50))
            let wrongKey = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--cacert", caFile.path, "--pin", "sha256//\(other.publicKeyPin)", url]
            )
            #expect(wrongKey.status == 60)
            #expect(wrongKey.stderrText.contains("pinned"))
            // -k turns certificate checks off, not pins (curl with -k --pinnedpubkey refuses too).
            let insecureWrongKey = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-k", "--pin", "sha256//\(other.publicKeyPin)", url]
            )
            #expect(insecureWrongKey.status == 60)
            #expect(insecureWrongKey.stderrText.contains("pinned"))
            let insecureWrongCertificate = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "-k", "--pin", otherFile.path, url]
            )
            #expect(insecureWrongCertificate.status == 60)
        }
    }

    /// A pin makes the session verify TLS itself, through sockets in a directory of its own
    /// under `TMPDIR` (``TLSBridge``). `ferry get --pin` used to leave that directory behind
    /// at every run: the session's shutdown, which removed it, had not run when the process
    /// exited. Now invalidating the session removes it, and the first bridge of a process
    /// removes those of the user's processes that are gone (and nothing else).
    @Test func aPinnedRunLeavesNoSocketDirectoryAndClearsThoseOfEndedProcesses() async throws {
        try await withTLSServer { server, ca in
            let scratch = try makeTemporaryDirectory("tls-leftovers")
            let temporary = scratch.appendingPathComponent("tmp", isDirectory: true)
            let caFile = scratch.appendingPathComponent("ca.pem")
            try Data(ca.certificatePEM.utf8).write(to: caFile)
            // A process that has ended: its pid, reaped.
            let ended = try ProcessRunner.spawn(
                "/bin/true",
                [],
                stdout: scratch.appendingPathComponent("true.out").path,
                stderr: scratch.appendingPathComponent("true.err").path
            )
            var status: Int32 = 0
            _ = waitpid(ended, &status, 0)
            let leftover = "ferry-tls-\(ended)-0a1b2c3d"
            let living = "ferry-tls-\(getpid())-0a1b2c3d"
            let notOurs = "ferry-tls-\(ended)-4e5f6a7b"
            let unrelated = "ferry-tls-notes"
            // An older version's name (a UUID's first 12 characters), which tells no process.
            let older = "ferry-tls-12345678-9AB"
            for name in [leftover, living, notOurs, unrelated, older] {
                try FileManager.default.createDirectory(
                    at: temporary.appendingPathComponent(name),
                    withIntermediateDirectories: true
                )
            }
            try Data().write(to: temporary.appendingPathComponent(leftover).appendingPathComponent("0.sock"))
            if geteuid() == 0 { #expect(chown(temporary.appendingPathComponent(notOurs).path, 65534, 65534) == 0) }
            let url = server.url("/bytes/50").absoluteString
            let pinned = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--pin", caFile.path, url],
                environment: ["TMPDIR": temporary.path]
            )
            #expect(pinned.status == 0, "\(pinned.stderrText)")
            #expect(pinned.stdout == TestContent.data(size: 50))
            let refused = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--pin", "sha256//\(try TestPKI(name: "Other key").publicKeyPin)", url],
                environment: ["TMPDIR": temporary.path]
            )
            #expect(refused.status == 60)
            let expected = geteuid() == 0 ? [living, notOurs, unrelated, older] : [living, unrelated, older]
            #expect(files(in: temporary) == expected.sorted())
        }
    }
}

extension String {
    /// Another valid pin: the same digest with its bytes reversed.
    var reversedBase64: String { Data((Data(base64Encoded: self) ?? Data()).reversed()).base64EncodedString() }
}

/// Answers server-trust challenges with `decide` and keeps them.
final class TrustDelegate: SessionDelegate {
    private let decide: @Sendable (ServerTrustChallenge) -> ServerTrustDisposition
    private let asked = Mutex<[ServerTrustChallenge]>([])

    init(_ decide: @escaping @Sendable (ServerTrustChallenge) -> ServerTrustDisposition) { self.decide = decide }

    var challenges: [ServerTrustChallenge] { asked.withLock { $0 } }

    func session(_ session: Session, didReceive challenge: ServerTrustChallenge) async -> ServerTrustDisposition {
        asked.withLock { $0.append(challenge) }
        return decide(challenge)
    }
}
