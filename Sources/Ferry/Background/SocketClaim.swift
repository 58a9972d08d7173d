package import Foundation

/// One daemon per socket: the claim a daemon holds beside its socket for its whole life.
///
/// The state directory's lock keeps one daemon per state directory, but two daemons with
/// different state directories could bind one socket path, each with its own store, and
/// requests reached whichever bound last. A daemon now also claims `<socket>.lock` (a
/// ``ProcessClaim``, dropped by the kernel however the daemon ends) and records its state
/// directory there, so a second daemon for that socket stops at once naming the owner, and
/// a command that finds the socket silent knows a daemon is starting rather than starting
/// another.
///
/// ```swift
/// let claim = try SocketClaim.claim(locations.socket, stateDirectory: locations.stateDirectory)
/// defer { claim.release() }
/// ```
package enum SocketClaim {
    /// The lock file beside `socket`.
    package static func lockFile(for socket: URL) -> URL {
        URL(fileURLWithPath: socket.path + ".lock")
    }

    /// Claims `socket` for the daemon whose state is in `stateDirectory`, making the
    /// socket's directory (0700) if needed.
    ///
    /// - Throws: ``FerryError/Reason/unsupportedConfiguration`` naming the owner's state
    ///   directory when another daemon holds the socket; a file-system error when the lock
    ///   cannot be made.
    package static func claim(_ socket: URL, stateDirectory: URL) throws(FerryError) -> ProcessClaim {
        let directory = socket.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(
                at: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw FerryError(.fileSystem, "Cannot make the socket's directory \(directory.path): \(error)")
        }
        guard let claim = try ProcessClaim(file: lockFile(for: socket)) else {
            throw FerryError(.unsupportedConfiguration, ownedMessage(socket, owner: owner(of: socket)))
        }
        try claim.record(stateDirectory.path)
        return claim
    }

    /// The state directory of the daemon that holds `socket` now: `""` when it holds the
    /// socket but has not recorded its directory yet, `nil` when no daemon holds it.
    package static func owner(of socket: URL) -> String? {
        ProcessClaim.holder(of: lockFile(for: socket))
    }

    /// What a second daemon, or a command that would start one, is told.
    package static func ownedMessage(_ socket: URL, owner: String?) -> String {
        let whose = owner.flatMap { $0.isEmpty ? nil : "the daemon of \($0)" } ?? "another daemon"
        return "The socket \(socket.path) belongs to \(whose); one daemon listens on a socket."
    }
}
