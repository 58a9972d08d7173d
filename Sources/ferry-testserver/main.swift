import ArgumentParser
import FerryTestServer
import Foundation

/// Runs FerryTestServer from the command line, for manual testing and benchmarks.
@main
struct FerryTestServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ferry-testserver",
        abstract: "Serve Ferry's test routes (deterministic content, ranges, faults) on loopback."
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0 picks a free one).")
    var port = 8080

    func run() async throws {
        let server = try await FerryTestServer.start(host: host, port: port)
        // Written unbuffered: scripts wait for this line in a file or pipe.
        FileHandle.standardOutput.write(Data("ferry-testserver listening on \(server.baseURL.absoluteString)\n".utf8))

        await server.run()
    }
}
