// The benchmark's in-process client for Ferry: the same three jobs as bench-ahc and
// bench-urlsession, through Ferry's public API. Run by Benchmarks/bench.py; see there.
//
//   bench-ferry download URL FILE          one download into FILE
//   bench-ferry gets URL COUNT             COUNT sequential GETs, prints {"seconds": …}
//   bench-ferry many LIST DIR CONNECTIONS [H2]
//                                          every URL of LIST into DIR, CONNECTIONS per host
//                                          (at most H2 of them HTTP/2 connections)
//   bench-ferry bytes URL                  streams the body through bytes(for:), prints
//                                          "COUNT SHA256" (the tests' bounded-memory check)
import Crypto
@_spi(Benchmarks) import Ferry
import Foundation

@main
struct BenchFerry {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            switch (arguments.first, arguments.count) {
            case ("download", 3): try await download(arguments[1], to: arguments[2])
            case ("gets", 3): try await gets(arguments[1], count: Int(arguments[2]) ?? 0)
            case ("bytes", 2): try await bytes(arguments[1])
            case ("many", 4), ("many", 5):
                try await many(
                    list: arguments[1],
                    into: arguments[2],
                    connections: Int(arguments[3]) ?? 6,
                    http2Connections: arguments.count == 5 ? Int(arguments[4]) : nil
                )
            default:
                FileHandle.standardError.write(
                    Data(
                        "usage: bench-ferry download URL FILE | gets URL COUNT | many LIST DIR N [H2] | bytes URL\n"
                            .utf8
                    )
                )
                exit(64)
            }
        } catch {
            FileHandle.standardError.write(Data("bench-ferry: \(error)\n".utf8))
            exit(1)
        }
    }

    static func url(_ string: String) throws -> URL {
        guard let url = URL(string: string) else { throw FerryError(.invalidURL, "Not a URL: \(string)") }
        return url
    }

    static func download(_ source: String, to path: String) async throws {
        let session = try Session(configuration: .ephemeral)
        let (_, response) = try await session.download(from: url(source), to: .file(URL(fileURLWithPath: path)))
        guard response.statusCode == 200 else { throw FerryError(.badServerResponse, "HTTP \(response.statusCode)") }
    }

    static func bytes(_ source: String) async throws {
        let session = try Session(configuration: .ephemeral)
        let (bytes, response) = try await session.bytes(from: url(source))
        guard response.statusCode == 200 else { throw FerryError(.badServerResponse, "HTTP \(response.statusCode)") }
        var hasher = SHA256()
        var count = 0
        for try await chunk in bytes.chunks {
            hasher.update(data: chunk)
            count += chunk.count
        }
        print("\(count) \(hasher.finalize().map { String(format: "%02x", $0) }.joined())")
    }

    static func gets(_ source: String, count: Int) async throws {
        let session = try Session(configuration: .ephemeral)
        let target = try url(source)
        let clock = ContinuousClock()
        let started = clock.now
        for _ in 0..<count {
            let (data, response) = try await session.data(from: target)
            guard response.statusCode == 200, data.count == 1024 else {
                throw FerryError(.badServerResponse, "HTTP \(response.statusCode), \(data.count) bytes")
            }
        }
        let elapsed = clock.now - started
        print("{\"seconds\": \(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)}")
    }

    static func many(list: String, into directory: String, connections: Int, http2Connections: Int?) async throws {
        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = connections
        configuration.http2MaximumConnectionsPerHost = http2Connections
        // HTTPS from a server with a certificate of the benchmark's own making.
        if let ca = ProcessInfo.processInfo.environment["FERRY_BENCH_CA"] {
            configuration.tls.trustRoots = .custom(pem: try String(contentsOfFile: ca, encoding: .utf8))
        }
        let session = try Session(configuration: configuration)
        let urls = try String(contentsOfFile: list, encoding: .utf8).split(separator: "\n").map { try url(String($0)) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            let folder = URL(fileURLWithPath: directory, isDirectory: true)
            for (index, source) in urls.enumerated() {
                let target = folder.appendingPathComponent("\(index)", isDirectory: false)
                group.addTask { _ = try await session.download(from: source, to: .file(target)) }
            }
            try await group.waitForAll()
        }
    }
}
