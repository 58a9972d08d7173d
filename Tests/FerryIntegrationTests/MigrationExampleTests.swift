import Ferry
import Foundation
import Testing

/// Examples/AFNetworkingMigration, run as a program against httpbin (gunicorn) and nginx:
/// each AFNetworking snippet of issue 15, rewritten with Ferry, must do its job against
/// servers nobody here wrote.
@Suite(
    "The AFNetworking migration example",
    .serialized,
    .enabled(if: Nginx.enabled && Httpbin.enabled)
)
struct MigrationExampleTests {
    @Test func everySnippetRunsAgainstHttpbinAndNginx() async throws {
        let root = try makeTemporaryDirectory("migration-root")
        let work = try makeTemporaryDirectory("migration-work")
        defer {
            try? FileManager.default.removeItem(at: root)
            try? FileManager.default.removeItem(at: work)
        }
        let files = root.appendingPathComponent("files")
        try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("uploads"),
            withIntermediateDirectories: true
        )
        try await makeRandomFile(files.appendingPathComponent("big.bin"), mebibytes: 8)
        try FileManager.default.copyItem(
            at: files.appendingPathComponent("big.bin"),
            to: work.appendingPathComponent("big.bin")
        )
        try "ada:{PLAIN}pw\n".write(to: root.appendingPathComponent("htpasswd"), atomically: true, encoding: .utf8)
        // Downloads at 4 MB/s, so the pause lands mid-file; PUT through WebDAV behind Basic.
        let nginx = try await Nginx(
            serving: root,
            server: """
                location /files/ { limit_rate 4m; }
                location /uploads/ {
                    dav_methods PUT; create_full_put_path on;
                    auth_basic "ferry"; auth_basic_user_file \(root.path)/htpasswd;
                }
                """
        )
        defer { nginx.stop() }
        try await withHttpbin { httpbin in
            let result = try await ProcessRunner.run(
                ProcessRunner.productsDirectory.appendingPathComponent("afnetworking-migration").path,
                [httpbin.url("/"), "http://127.0.0.1:\(nginx.port)/", work.path]
            )
            print(result.stdoutText)
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderrText)")
            let lines = result.stdoutText.split(separator: "\n")
            #expect(lines.count == 6)
            #expect(lines.allSatisfy { $0.hasPrefix("ok ") })
        }
        // nginx's log: the manager's Basic field went with the first PUT (no 401 first).
        let log = try String(contentsOf: nginx.accessLog, encoding: .utf8)
        #expect(log.contains("PUT /uploads/notes.txt 201"))
        #expect(!log.contains("PUT /uploads/notes.txt 401"))
        // The resumed download asked for the rest with a range: a 206 for /files/big.bin.
        #expect(log.contains("GET /files/big.bin 206"))
    }
}
