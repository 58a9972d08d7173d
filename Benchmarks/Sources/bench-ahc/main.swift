// The benchmark's in-process client for raw AsyncHTTPClient, written the way its README
// shows: `execute` and a loop over the body, files written with NIOFileSystem. The same
// jobs as bench-ferry; run by Benchmarks/bench.py.
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOFileSystem
import NIOSSL

@main
struct BenchAHC {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        var configuration = HTTPClient.Configuration()
        if arguments.first == "many", arguments.count == 4 {
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = Int(arguments[3]) ?? 6
        }
        // HTTPS from a server with a certificate of the benchmark's own making.
        if let ca = ProcessInfo.processInfo.environment["FERRY_BENCH_CA"] {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates((try? NIOSSLCertificate.fromPEMFile(ca)) ?? [])
            configuration.tlsConfiguration = tls
        }
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        var status: Int32 = 0
        do {
            switch (arguments.first, arguments.count) {
            case ("download", 3): try await download(arguments[1], to: arguments[2], client: client)
            case ("gets", 3): try await gets(arguments[1], count: Int(arguments[2]) ?? 0, client: client)
            case ("many", 4):
                try await many(
                    list: arguments[1],
                    into: arguments[2],
                    concurrent: Int(arguments[3]) ?? 6,
                    client: client
                )
            default:
                FileHandle.standardError.write(
                    Data("usage: bench-ahc download URL FILE | gets URL COUNT | many LIST DIR N\n".utf8)
                )
                status = 64
            }
        } catch {
            FileHandle.standardError.write(Data("bench-ahc: \(error)\n".utf8))
            status = 1
        }
        try? await client.shutdown()
        exit(status)
    }

    struct BadStatus: Error { let status: UInt }

    static func download(_ source: String, to path: String, client: HTTPClient) async throws {
        let response = try await client.execute(HTTPClientRequest(url: source), timeout: .seconds(600))
        guard response.status == .ok else { throw BadStatus(status: response.status.code) }
        try await FileSystem.shared.withFileHandle(
            forWritingAt: FilePath(path),
            options: .newFile(replaceExisting: true)
        ) { handle in
            var offset: Int64 = 0
            for try await buffer in response.body {
                try await handle.write(contentsOf: buffer, toAbsoluteOffset: offset)
                offset += Int64(buffer.readableBytes)
            }
        }
    }

    static func gets(_ source: String, count: Int, client: HTTPClient) async throws {
        let clock = ContinuousClock()
        let started = clock.now
        for _ in 0..<count {
            let response = try await client.execute(HTTPClientRequest(url: source), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok, body.readableBytes == 1024 else {
                throw BadStatus(status: response.status.code)
            }
        }
        let elapsed = clock.now - started
        print("{\"seconds\": \(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)}")
    }

    /// Every URL of `list` into `directory`, `concurrent` at a time (as Ferry's per-host
    /// limit and `curl --parallel-max` hold them; over HTTP/2 the pool alone would start all).
    static func many(list: String, into directory: String, concurrent: Int, client: HTTPClient) async throws {
        let urls = try String(contentsOfFile: list, encoding: .utf8).split(separator: "\n").map(String.init)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, source) in urls.enumerated() {
                if index >= concurrent { try await group.next() }
                group.addTask { try await download(source, to: "\(directory)/\(index)", client: client) }
            }
            try await group.waitForAll()
        }
    }
}
