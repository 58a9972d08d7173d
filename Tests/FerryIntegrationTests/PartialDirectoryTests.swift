import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A private partial directory per user: the default is one per uid, and a directory in a
/// place everyone may write to that another user could have prepared is refused.
@Suite("A private partial directory per user", .serialized)
struct PartialDirectoryTests {
    @Test func theDefaultIsOnePerUser() {
        let directory = SessionConfiguration.default.downloadsDirectory
        #expect(directory.lastPathComponent == "ferry-downloads-\(geteuid())")
    }

    /// In a sticky, world-writable directory (as /tmp): a partials directory that is a link,
    /// belongs to another user, or is writable by others is refused with a clear error, and
    /// nothing is written into it; one of this user's, closed to others, works.
    @Test(.enabled(if: geteuid() == 0, "chown to another user needs root"))
    func aDirectoryAnotherUserCouldHavePreparedIsRefused() async throws {
        try await withServer { server in
            let shared = try makeTemporaryDirectory("shared")
            defer { try? FileManager.default.removeItem(at: shared) }
            chmod(shared.path, 0o1777)
            let cases: [(String, (URL) throws -> Void)] = [
                (
                    "another owner",
                    { url in
                        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
                        chmod(url.path, 0o700)
                        chown(url.path, 65534, 65534)
                    }
                ),
                (
                    "writable by others",
                    { url in
                        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
                        chmod(url.path, 0o777)
                    }
                ),
                (
                    "a link",
                    { url in
                        let real = shared.appendingPathComponent("real-\(UUID().uuidString.prefix(4))")
                        try FileManager.default.createDirectory(at: real, withIntermediateDirectories: false)
                        chmod(real.path, 0o700)
                        try FileManager.default.createSymbolicLink(at: url, withDestinationURL: real)
                    }
                ),
            ]
            for (label, prepare) in cases {
                let partials = shared.appendingPathComponent("partials-\(UUID().uuidString.prefix(4))")
                try prepare(partials)
                let session = try makeSession { $0.downloadsDirectory = partials }
                await #expect(throws: FerryError.self, "\(label)") {
                    try await session.download(from: server.url("/bytes/100"))
                }
                #expect(files(in: partials).allSatisfy { !$0.hasSuffix(".partial") }, "\(label)")
            }
            let mine = shared.appendingPathComponent("mine")
            let session = try makeSession { $0.downloadsDirectory = mine }
            let (file, _) = try await session.download(from: server.url("/bytes/100"))
            #expect(try Data(contentsOf: file) == TestContent.data(size: 100))
            var info = stat()
            #expect(lstat(mine.path, &info) == 0 && info.st_mode & 0o777 == 0o700)
        }
    }

    /// The CLI with another user's `ferry-downloads-UID` planted in its TMPDIR: a download
    /// to standard output needs no partial directory at all, works, and puts nothing there.
    @Test(.enabled(if: geteuid() == 0, "chown to another user needs root"))
    func anotherUsersDefaultDirectoryIsNeverUsed() async throws {
        try await withServer { server in
            let temporary = try makeTemporaryDirectory("tmpdir")
            defer { try? FileManager.default.removeItem(at: temporary) }
            chmod(temporary.path, 0o1777)
            let planted = temporary.appendingPathComponent("ferry-downloads-\(geteuid())")
            try FileManager.default.createDirectory(at: planted, withIntermediateDirectories: false)
            chmod(planted.path, 0o777)
            chown(planted.path, 65534, 65534)
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", server.url("/bytes/1000").absoluteString],
                environment: ["TMPDIR": temporary.path]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            #expect(result.stdout == TestContent.data(size: 1000))
            #expect(files(in: planted).isEmpty)
        }
    }
}
