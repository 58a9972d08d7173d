import Ferry
import FerryTestServer
import Foundation
import Testing

/// HTTP/2 against nginx (`listen … ssl http2`), a server nobody here wrote: downloads over
/// multiplexed streams are byte-identical, and concurrent ones use one connection per event
/// loop, never one per request.
@Suite("HTTP/2 against nginx", .serialized, .enabled(if: Nginx.enabled))
struct HTTP2Tests {
    @Test func concurrentDownloadsShareAConnectionPerEventLoop() async throws {
        let root = try makeTemporaryDirectory("h2-root")
        let output = try makeTemporaryDirectory("h2-out")
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: output)
        }
        let count = 60
        var digests: [String] = []
        for index in 0..<count {
            let bytes = Data((0..<(64 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) })
            try bytes.write(to: root.appendingPathComponent("\(index).bin"))
            digests.append(sha256Hex(bytes))
        }
        let ca = try TestPKI(name: "Ferry HTTP/2 CA \(UUID().uuidString.prefix(8))")
        let identity = try ca.issueServerIdentity(for: ["127.0.0.1"])
        let certificate = root.appendingPathComponent("cert.pem")
        let key = root.appendingPathComponent("key.pem")
        try identity.certificatePEM.write(to: certificate, atomically: true, encoding: .utf8)
        try identity.privateKeyPEM.write(to: key, atomically: true, encoding: .utf8)
        let nginx = try await Nginx(
            serving: root,
            server: """
                ssl_certificate \(certificate.path); ssl_certificate_key \(key.path);
                access_log \(root.path)/connections.log connections;
                """,
            listen: "ssl http2"
        )
        defer { nginx.stop() }

        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 6
        configuration.tls.trustRoots = .custom(pem: ca.certificatePEM)
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let first = try #require(URL(string: "https://127.0.0.1:\(nginx.port)/0.bin"))
        let (_, response) = try await session.download(from: first, to: .file(output.appendingPathComponent("0")))
        #expect(response.statusCode == 200)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 1..<count {
                let url = try #require(URL(string: "https://127.0.0.1:\(nginx.port)/\(index).bin"))
                let target = output.appendingPathComponent("\(index)")
                group.addTask { _ = try await session.download(from: url, to: .file(target)) }
            }
            try await group.waitForAll()
        }
        for index in 0..<count {
            let data = try Data(contentsOf: output.appendingPathComponent("\(index)"))
            #expect(sha256Hex(data) == digests[index], "file \(index)")
        }
        let lines = try String(contentsOf: root.appendingPathComponent("connections.log"), encoding: .utf8)
            .split(separator: "\n")
        #expect(lines.count == count)
        #expect(lines.allSatisfy { $0.hasSuffix(" HTTP/2.0 200") }, "every request over HTTP/2")
        let connections = Set(lines.map { $0.split(separator: " ")[0] })
        // The engine's event loops: one per core (NIO's singleton group).
        let loops = ProcessInfo.processInfo.activeProcessorCount
        #expect(connections.count <= loops, "\(connections.count) connections for \(loops) event loops")
    }
}
