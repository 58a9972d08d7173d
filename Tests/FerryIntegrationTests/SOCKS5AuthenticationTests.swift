import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// microsocks (Debian's package), a SOCKS5 server nobody here wrote, on a free loopback
/// port, with or without a user name and password: started and stopped by the test.
final class Microsocks {
    static let binary = ["/usr/bin/microsocks", "/usr/local/bin/microsocks"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    /// Set by CI: these tests must run, not be skipped.
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_MICROSOCKS"] == "1" }
    static var enabled: Bool { binary != nil || required }

    private let server: ServerProcess
    var port: Int { server.port }

    /// Asks for `user` and `password` when given, else for nothing.
    init(user: String?, password: String?) async throws {
        let binary = try #require(Self.binary, "microsocks is not installed (apt-get install microsocks)")
        let credential = user.map { ["-u", $0, "-P", password ?? ""] } ?? []
        server = try await ServerProcess(binary, ["-i", "127.0.0.1", "-p", "PORT"] + credential)
    }

    func stop() { server.stop() }
}

@Suite("SOCKS5 with a user name and password (microsocks)", .serialized, .enabled(if: Microsocks.enabled))
struct SOCKS5AuthenticationTests {
    @Test func theLibraryAuthenticatesAndRefusalsAreClear() async throws {
        let socks = try await Microsocks(user: "ada", password: "s3cret")
        defer { socks.stop() }
        try await withServer { server in
            let url = server.url("/bytes/300000?seed=7")
            let good = try makeSession {
                $0.proxy = .socks5(
                    host: "127.0.0.1",
                    port: socks.port,
                    credential: Credential(user: "ada", password: "s3cret")
                )
            }
            let (data, response) = try await good.data(from: url)
            #expect(response.statusCode == 200)
            #expect(data == TestContent.data(size: 300_000, seed: 7))
            // A download through it too (the bridge's connection, resumable as ever).
            let (file, _) = try await good.download(from: url)
            #expect(try Data(contentsOf: file) == data)

            let wrong = try makeSession {
                $0.proxy = .socks5(
                    host: "127.0.0.1",
                    port: socks.port,
                    credential: Credential(user: "ada", password: "no")
                )
            }
            await #expect {
                _ = try await wrong.data(from: url)
            } throws: { error in
                let error = error as? FerryError
                return error?.reason == .network
                    && error?.description.contains("refused the user name and password") == true
            }
            let none = try makeSession { $0.proxy = .socks5(host: "127.0.0.1", port: socks.port) }
            await #expect {
                _ = try await none.data(from: url)
            } throws: { error in
                (error as? FerryError)?.reason == .network
            }
        }
    }

    @Test func httpsThroughTheProxyIsVerifiedAtTheOrigin() async throws {
        let socks = try await Microsocks(user: "ada", password: "s3cret")
        defer { socks.stop() }
        try await withTLSServer { server, ca in
            let session = try makeSession {
                $0.proxy = .socks5(
                    host: "127.0.0.1",
                    port: socks.port,
                    credential: Credential(user: "ada", password: "s3cret")
                )
                $0.tls.trustRoots = .custom(pem: ca.certificatePEM)
            }
            let (data, response) = try await session.data(from: server.url("/bytes/1000"))
            #expect(response.statusCode == 200)
            #expect(data.count == 1000)
        }
    }

    /// `ferry get -x socks5://user:pass@…` beside `curl -x` with the same URL.
    @Test func ferryGetDashXBesideCurl() async throws {
        let socks = try await Microsocks(user: "ada", password: "s3cret")
        defer { socks.stop() }
        try await withServer { server in
            let directory = try makeTemporaryDirectory("socks-cli")
            defer { try? FileManager.default.removeItem(at: directory) }
            let url = server.url("/bytes/200000?seed=3").absoluteString
            let proxy = "socks5://ada:s3cret@127.0.0.1:\(socks.port)"
            let ferry = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--quiet", "-x", proxy, "-o", directory.appendingPathComponent("ferry.bin").path, url]
            )
            #expect(ferry.status == 0, "\(ferry.stderrText)")
            let curl = try await ProcessRunner.run(
                "/usr/bin/curl",
                ["-sS", "-x", proxy, "-o", directory.appendingPathComponent("curl.bin").path, url]
            )
            #expect(curl.status == 0, "\(curl.stderrText)")
            let ferryBytes = try Data(contentsOf: directory.appendingPathComponent("ferry.bin"))
            #expect(ferryBytes == TestContent.data(size: 200_000, seed: 3))
            #expect(ferryBytes == (try Data(contentsOf: directory.appendingPathComponent("curl.bin"))))

            // A wrong password: both fail, ferry with its network exit code (curl: 97).
            let badProxy = "socks5://ada:wrong@127.0.0.1:\(socks.port)"
            let refused = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "get", "--quiet", "--retries", "0", "-x", badProxy, "-o",
                    directory.appendingPathComponent("no.bin").path, url,
                ]
            )
            #expect(refused.status == 7, "\(refused.stderrText)")
            #expect(refused.stderrText.contains("refused the user name and password"))
            let curlRefused = try await ProcessRunner.run("/usr/bin/curl", ["-sS", "-x", badProxy, "-o", "-", url])
            #expect(curlRefused.status != 0)
        }
    }
}
