import Foundation
import Testing

@testable import Ferry

/// The claim beside a daemon's socket, in one process: `flock(2)` locks belong to an open
/// file, so a second open of the lock file sees the first one's claim as another process
/// would. The race between processes is `DaemonSocketTests`'.
@Suite("SocketClaim")
struct SocketClaimTests {
    func makeSocketPath() -> URL {
        FileManager.default.temporaryDirectory
            .appendingPathComponent("claim-\(UUID().uuidString)/run/daemon.sock")
    }

    @Test func aClaimRecordsItsStateDirectoryForOthersToRead() throws {
        let socket = makeSocketPath()
        defer {
            try? FileManager.default.removeItem(at: socket.deletingLastPathComponent().deletingLastPathComponent())
        }
        #expect(SocketClaim.owner(of: socket) == nil, "nobody holds a socket never claimed")
        let claim = try SocketClaim.claim(socket, stateDirectory: URL(fileURLWithPath: "/state/a"))
        #expect(SocketClaim.owner(of: socket) == "/state/a")
        // The socket's directory was made, private.
        var info = stat()
        #expect(stat(socket.deletingLastPathComponent().path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        claim.release()
        #expect(SocketClaim.owner(of: socket) == nil, "released: nobody holds it, whatever the file says")
    }

    @Test func aSecondClaimIsRefusedNamingTheOwner() throws {
        let socket = makeSocketPath()
        defer {
            try? FileManager.default.removeItem(at: socket.deletingLastPathComponent().deletingLastPathComponent())
        }
        let first = try SocketClaim.claim(socket, stateDirectory: URL(fileURLWithPath: "/state/a"))
        defer { first.release() }
        #expect {
            _ = try SocketClaim.claim(socket, stateDirectory: URL(fileURLWithPath: "/state/b"))
        } throws: { error in
            guard let error = error as? FerryError else { return false }
            return error.reason == .unsupportedConfiguration && error.description.contains("/state/a")
                && error.description.contains(socket.path)
        }
        // The refused claim changed nothing.
        #expect(SocketClaim.owner(of: socket) == "/state/a")
        first.release()
        let second = try SocketClaim.claim(socket, stateDirectory: URL(fileURLWithPath: "/state/b"))
        #expect(SocketClaim.owner(of: socket) == "/state/b", "a new owner's record replaces the old one")
        second.release()
    }

    @Test func anOwnerThatHasNotRecordedItselfYetIsStillAnOwner() throws {
        let socket = makeSocketPath()
        defer {
            try? FileManager.default.removeItem(at: socket.deletingLastPathComponent().deletingLastPathComponent())
        }
        try FileManager.default.createDirectory(
            at: socket.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        let bare = try #require(try ProcessClaim(file: SocketClaim.lockFile(for: socket)))
        defer { bare.release() }
        #expect(SocketClaim.owner(of: socket) == "")
        #expect(SocketClaim.ownedMessage(socket, owner: "").contains("another daemon"))
        #expect(SocketClaim.ownedMessage(socket, owner: "/state/a").contains("the daemon of /state/a"))
    }
}
