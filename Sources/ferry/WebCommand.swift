import ArgumentParser
import Ferry
import FerryBackground
import Foundation

/// `ferry web`: prints the address of the daemon's web page, with its token.
struct WebCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "web",
        abstract: "Print the address of the daemon's web page (started with `ferry daemon --web`).",
        discussion: """
            The address carries the token the daemon made at its start; anyone with it can \
            add, pause and cancel transfers, so share it with nobody. The daemon keeps it in \
            web.url in its state directory, readable by you alone.
            """
    )

    @OptionGroup var daemon: DaemonOptions

    /// Where a running daemon keeps its web address.
    static func addressFile(_ locations: BackgroundLocations) -> URL {
        locations.stateDirectory.appendingPathComponent("web.url")
    }

    func run() async throws {
        let locations = daemon.locations
        guard (try? await daemon.client.health()) == true else {
            ExitStatus.exit(with: FerryError(.network, "No daemon answers on \(locations.socket.path)."))
        }
        guard let address = try? String(contentsOf: Self.addressFile(locations), encoding: .utf8) else {
            ExitStatus.exit(
                with: FerryError(.unsupportedConfiguration, "The daemon runs without a web page: start it with --web.")
            )
        }
        print(address.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
