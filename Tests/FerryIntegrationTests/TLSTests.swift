import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Starts an HTTPS FerryTestServer with a certificate from a CA made for this test.
func withTLSServer<Result>(
    requireClientCertificatesFrom clientCA: String? = nil,
    _ body: (FerryTestServer, TestPKI) async throws -> Result
) async throws -> Result {
    let ca = try TestPKI(name: "Ferry Test CA \(UUID().uuidString.prefix(8))")
    let identity = try ca.issueServerIdentity(for: ["127.0.0.1", "localhost"])
    let server = try await FerryTestServer.start(tls: identity, requireClientCertificatesFrom: clientCA)
    do {
        let result = try await body(server, ca)
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
        }
    }
}
