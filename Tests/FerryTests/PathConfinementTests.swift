import Ferry
import Foundation
import Testing

/// `PathConfinement`: paths judged with links resolved as far as they exist, the missing
/// rest as written; real directories and links in the test's folder.
@Suite("PathConfinement")
struct PathConfinementTests {
    @Test func linksAreResolvedAsFarAsThePathExists() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("confine-\(UUID().uuidString)")
        let real = base.appendingPathComponent("real/inner", isDirectory: true)
        try FileManager.default.createDirectory(at: real, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: base) }
        let root = PathConfinement.resolvedExistingPrefix(base).path
        try FileManager.default.createSymbolicLink(
            atPath: base.appendingPathComponent("link").path,
            withDestinationPath: real.path
        )
        try FileManager.default.createSymbolicLink(
            atPath: base.appendingPathComponent("dangling").path,
            withDestinationPath: base.appendingPathComponent("nowhere").path
        )
        try Data("x".utf8).write(to: base.appendingPathComponent("file"))
        let cases: [(String, String)] = [
            ("real/inner", "\(root)/real/inner"),
            ("link", "\(root)/real/inner"),
            ("link/new/deeper", "\(root)/real/inner/new/deeper"),
            ("missing/a", "\(root)/missing/a"),
            ("dangling/a", "\(root)/dangling/a"),
            ("file/a", "\(root)/file/a"),
            ("real/../link/x", "\(root)/real/inner/x"),
        ]
        for (path, expected) in cases {
            let resolved = PathConfinement.resolvedExistingPrefix(base.appendingPathComponent(path)).path
            #expect(resolved == expected, "\(path)")
        }
        #expect(PathConfinement.resolvedExistingPrefix(URL(fileURLWithPath: "/")).path == "/")
        #expect(
            PathConfinement.resolvedExistingPrefix(URL(fileURLWithPath: "/no-such-dir-\(UUID())/x")).path.hasPrefix(
                "/no-such-dir-"
            )
        )

        let allowed = [base.appendingPathComponent("real")]
        #expect(PathConfinement.contains(allowed, base.appendingPathComponent("link/f")))
        #expect(PathConfinement.contains(allowed, base.appendingPathComponent("real/f")))
        #expect(PathConfinement.contains(allowed, base.appendingPathComponent("real/new/f")))
        #expect(!PathConfinement.contains(allowed, base.appendingPathComponent("dangling/f")))
        #expect(!PathConfinement.contains(allowed, base.appendingPathComponent("realm/f")))
        #expect(!PathConfinement.contains(allowed, base.appendingPathComponent("f")))
        #expect(PathConfinement.contains([URL(fileURLWithPath: "/")], base.appendingPathComponent("f")))
    }
}
