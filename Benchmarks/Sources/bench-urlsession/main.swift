// The benchmark's in-process client for Foundation's URLSession (swift-corelibs-foundation
// on Linux): download tasks moved into place, data tasks for small GETs. The same jobs as
// bench-ferry; run by Benchmarks/bench.py.
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@main
struct BenchURLSession {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            switch (arguments.first, arguments.count) {
            case ("download", 3): try await download(arguments[1], to: arguments[2], session: .shared)
            case ("gets", 3): try await gets(arguments[1], count: Int(arguments[2]) ?? 0)
            case ("many", 4):
                try await many(list: arguments[1], into: arguments[2], connections: Int(arguments[3]) ?? 6)
            default:
                FileHandle.standardError.write(
                    Data("usage: bench-urlsession download URL FILE | gets URL COUNT | many LIST DIR N\n".utf8)
                )
                exit(64)
            }
        } catch {
            FileHandle.standardError.write(Data("bench-urlsession: \(error)\n".utf8))
            exit(1)
        }
    }

    struct BadResponse: Error { let detail: String }

    static func url(_ string: String) throws -> URL {
        guard let url = URL(string: string) else { throw BadResponse(detail: "not a URL: \(string)") }
        return url
    }

    static func download(_ source: String, to path: String, session: URLSession) async throws {
        let (temporary, response) = try await session.download(from: url(source))
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw BadResponse(detail: "\(response)") }
        let target = URL(fileURLWithPath: path)
        try? FileManager.default.removeItem(at: target)
        try FileManager.default.moveItem(at: temporary, to: target)
    }

    static func gets(_ source: String, count: Int) async throws {
        let session = URLSession(configuration: .ephemeral)
        let target = try url(source)
        let clock = ContinuousClock()
        let started = clock.now
        for _ in 0..<count {
            let (data, response) = try await session.data(from: target)
            guard (response as? HTTPURLResponse)?.statusCode == 200, data.count == 1024 else {
                throw BadResponse(detail: "\(response), \(data.count) bytes")
            }
        }
        let elapsed = clock.now - started
        print("{\"seconds\": \(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)}")
    }

    static func many(list: String, into directory: String, connections: Int) async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = connections
        let session = URLSession(configuration: configuration)
        let urls = try String(contentsOfFile: list, encoding: .utf8).split(separator: "\n").map(String.init)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, source) in urls.enumerated() {
                group.addTask { try await download(source, to: "\(directory)/\(index)", session: session) }
            }
            try await group.waitForAll()
        }
    }
}
