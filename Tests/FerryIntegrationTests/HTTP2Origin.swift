import Ferry
import FerryTestServer
import Foundation
import Testing

/// An nginx serving `root` over TLS with HTTP/2 (`listen … ssl http2`), with a CA of its own
/// that sessions and commands trust, and a log of each request's protocol (the `protocols`
/// format: `$server_protocol $request_method $uri $status $http_range [$http_authorization]
/// $connection`).
final class HTTP2Origin {
    let root: URL
    let ca: TestPKI
    let caFile: URL
    let nginx: Nginx

    /// - Parameters:
    ///   - server: added inside nginx's `server { }` (locations, limits).
    ///   - reloadable: see ``Nginx/reload()``.
    ///   - ca: the CA that issues the certificate (a second origin shares the first's).
    ///   - listen: the `listen` parameters: `ssl` alone for an origin that speaks HTTP/1.1.
    init(
        root: URL,
        server extra: String = "",
        reloadable: Bool = false,
        ca: TestPKI? = nil,
        listen: String = "ssl http2"
    ) async throws {
        self.root = root
        let ca = try ca ?? TestPKI(name: "Ferry HTTP/2 CA \(UUID().uuidString.prefix(8))")
        self.ca = ca
        let prefix = "tls-\(UUID().uuidString.prefix(8))"
        let (certificate, key) = try ca.issueServerIdentity(for: ["127.0.0.1"])
            .writePEMFiles(in: root, prefix: "\(prefix)-")
        caFile = root.appendingPathComponent("\(prefix)-ca.pem")
        try ca.certificatePEM.write(to: caFile, atomically: true, encoding: .utf8)
        nginx = try await Nginx(
            serving: root,
            server: """
                ssl_certificate \(certificate.path); ssl_certificate_key \(key.path);
                access_log \(root.path)/\(prefix)-protocols.log protocols;
                \(extra)
                """,
            listen: listen,
            reloadable: reloadable
        )
        log = root.appendingPathComponent("\(prefix)-protocols.log")
    }

    /// The `protocols` log.
    let log: URL

    func url(_ path: String) throws -> URL {
        try #require(URL(string: "https://127.0.0.1:\(nginx.port)\(path)"))
    }

    /// The log's lines so far.
    func logged() throws -> [String] {
        guard FileManager.default.fileExists(atPath: log.path) else { return [] }
        return try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    /// A session that trusts this origin's CA.
    func session(_ adjust: (inout SessionConfiguration) -> Void = { _ in }) throws -> Session {
        var configuration = SessionConfiguration.ephemeral
        configuration.tls.trustRoots = .custom(pem: ca.certificatePEM)
        adjust(&configuration)
        return try Session(configuration: configuration)
    }

    func stop() {
        nginx.stop()
    }
}

/// A directory for an ``HTTP2Origin``: `file.bin` (`mebibytes` of random bytes; none for 0)
/// and `out/`.
func makeHTTP2Root(_ label: String, mebibytes: Int = 1) async throws -> URL {
    let root = try makeTemporaryDirectory(label)
    try FileManager.default.createDirectory(at: root.appendingPathComponent("out"), withIntermediateDirectories: true)
    if mebibytes > 0 { try await makeRandomFile(root.appendingPathComponent("file.bin"), mebibytes: mebibytes) }
    return root
}

/// Waits for `pid` to exit and returns its exit status (128 + N for signal N); kills it
/// after two minutes.
func exitStatus(of pid: pid_t) async throws -> Int32 {
    var status: Int32 = 0
    for _ in 0..<12_000 {
        if waitpid(pid, &status, WNOHANG) == pid {
            return (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        }
        try await Task.sleep(for: .milliseconds(10))
    }
    kill(pid, SIGKILL)
    Issue.record("the process did not exit")
    return -1
}
