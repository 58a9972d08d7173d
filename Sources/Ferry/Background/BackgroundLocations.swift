package import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a user's daemon keeps its state and listens, by the rules every `ferry` command
/// and the library share: an explicit path, else `FERRY_STATE_DIR` / `FERRY_SOCKET`, else
/// the XDG directories (`$XDG_STATE_HOME/ferry`, `$XDG_RUNTIME_DIR/ferry/daemon.sock`),
/// else `~/.local/state/ferry` and a socket inside it.
package struct BackgroundLocations: Sendable, Equatable {
    package var stateDirectory: URL
    package var socket: URL

    package init(
        stateDirectory: String? = nil,
        socket: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        let state: URL
        if let path = stateDirectory ?? environment["FERRY_STATE_DIR"], !path.isEmpty {
            state = URL(fileURLWithPath: path, isDirectory: true)
        } else if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            state = URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("ferry", isDirectory: true)
        } else {
            state = FileManager.default.homeDirectoryForCurrentUser
                .appendingPathComponent(".local/state/ferry", isDirectory: true)
        }
        self.stateDirectory = state.standardizedFileURL
        if let path = socket ?? environment["FERRY_SOCKET"], !path.isEmpty {
            self.socket = URL(fileURLWithPath: path)
        } else if stateDirectory == nil, environment["FERRY_STATE_DIR"] == nil,
            let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/")
        {
            self.socket = URL(fileURLWithPath: runtime).appendingPathComponent("ferry/daemon.sock")
        } else {
            self.socket = self.stateDirectory.appendingPathComponent("daemon.sock")
        }
    }
}
