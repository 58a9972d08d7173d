import Foundation
import Testing

/// `ferry get -c` over a file another program left: continued only once a range that
/// overlaps its last bytes comes back with the same bytes, otherwise started over, saying
/// why. curl `-C -` appends whatever the server has to whatever the file holds (shown here
/// on the same files, against nginx).
@Suite("ferry get -c over a file ferry did not write, against nginx beside curl")
struct ForeignPartialTests {
    static let curl = "/usr/bin/curl"
    static var enabled: Bool { Nginx.enabled && FileManager.default.isExecutableFile(atPath: curl) }

    @Test(.enabled(if: enabled))
    func aCurlPartialIsContinuedAndAnotherVersionStartsOver() async throws {
        let root = try makeTemporaryDirectory("foreign-root")
        try await makeRandomFile(root.appendingPathComponent("v2.bin"), mebibytes: 2)
        try await makeRandomFile(root.appendingPathComponent("v1.bin"), mebibytes: 2)
        // nginx never answers a range under /whole/ (max_ranges 0: always 200).
        let nginx = try await Nginx(
            serving: root,
            server: "location /whole/ { alias \(root.path)/; max_ranges 0; }"
        )
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/v2.bin"
        let expected = try Data(contentsOf: root.appendingPathComponent("v2.bin"))
        let out = try makeTemporaryDirectory("foreign-out")

        // A truncated copy curl made: continued from its end, the overlap checked.
        let partial = out.appendingPathComponent("partial.bin")
        let cut = try await ProcessRunner.run(Self.curl, ["-s", "-r", "0-799999", "-o", partial.path, url])
        #expect(cut.status == 0)
        let continued = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-c", "-o", partial.path, url])
        #expect(continued.status == 0, "\(continued.stderrText)")
        #expect(try Data(contentsOf: partial) == expected)
        #expect(
            continued.stderrText.contains(
                "'\(partial.path)' was not written by ferry; its last 65536 bytes are the server's: continuing it"
            ),
            "\(continued.stderrText)"
        )
        #expect(continued.stderrText.contains("continued at byte 800000 (800000 bytes kept)"))
        // The overlap and then the rest: nothing below byte 734464 was fetched again.
        let log = try String(contentsOf: nginx.accessLog, encoding: .utf8).split(separator: "\n").suffix(2)
        #expect(log.first?.hasSuffix("GET /v2.bin 206 65536") == true, "\(log)")
        #expect(log.last?.hasSuffix("GET /v2.bin 206 \(expected.count - 800_000)") == true, "\(log)")
        #expect(files(in: out) == ["partial.bin"], "nothing left beside it")

        // The first bytes of another version of the file: started over, said so, the
        // right file in the end. curl -C - appends the new version's rest to the old bytes.
        let old = try Data(contentsOf: root.appendingPathComponent("v1.bin")).prefix(800_000)
        let ours = out.appendingPathComponent("ours.bin")
        let theirs = out.appendingPathComponent("theirs.bin")
        try old.write(to: ours)
        try old.write(to: theirs)
        let restarted = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-c", "-o", ours.path, url])
        let blind = try await ProcessRunner.run(Self.curl, ["-s", "-C", "-", "-o", theirs.path, url])
        #expect(restarted.status == 0 && blind.status == 0)
        #expect(try Data(contentsOf: ours) == expected, "ferry: the server's file")
        #expect(
            restarted.stderrText.contains(
                "cannot be continued: its last 65536 bytes are not the server's; downloading it again from byte 0"
            ),
            "\(restarted.stderrText)"
        )
        let mixed = try Data(contentsOf: theirs)
        #expect(mixed.count == expected.count && mixed != expected, "curl -C - made a mix of two versions")

        // A file longer than the server's, and one that is the server's whole file.
        let longer = out.appendingPathComponent("longer.bin")
        try (expected + Data(count: 1000)).write(to: longer)
        let shortened = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-c", "-o", longer.path, url])
        #expect(shortened.status == 0)
        #expect(shortened.stderrText.contains("it is longer than the server's file"), "\(shortened.stderrText)")
        #expect(try Data(contentsOf: longer) == expected)
        let done = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-c", "-o", longer.path, url])
        #expect(done.status == 0)
        #expect(done.stderrText.contains("is complete already (\(expected.count) bytes, its last 65536 the server's)"))

        // A server that ignores Range, for a foreign file and for ferry's own bytes.
        let whole = "http://127.0.0.1:\(nginx.port)/whole/v2.bin"
        let ignored = out.appendingPathComponent("ignored.bin")
        try expected.prefix(800_000).write(to: ignored)
        let foreign = try await ProcessRunner.run(ProcessRunner.ferry, ["get", "-c", "-o", ignored.path, whole])
        #expect(foreign.status == 0)
        #expect(foreign.stderrText.contains("the server ignored Range (it answered 200 with the whole file)"))
        #expect(try Data(contentsOf: ignored) == expected)
    }

    /// The same check for each named file of an input list (`-i`, `out=`).
    @Test(.enabled(if: enabled))
    func eachNamedFileOfAListIsCheckedToo() async throws {
        let root = try makeTemporaryDirectory("foreign-list-root")
        try await makeRandomFile(root.appendingPathComponent("a.bin"), mebibytes: 1)
        try await makeRandomFile(root.appendingPathComponent("b.bin"), mebibytes: 1)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let out = try makeTemporaryDirectory("foreign-list-out")
        let a = try Data(contentsOf: root.appendingPathComponent("a.bin"))
        let b = try Data(contentsOf: root.appendingPathComponent("b.bin"))
        // a: the first half of the server's; b: the first half of another file.
        try a.prefix(500_000).write(to: out.appendingPathComponent("a.bin"))
        try a.prefix(500_000).write(to: out.appendingPathComponent("b.bin"))
        let base = "http://127.0.0.1:\(nginx.port)"
        let list = out.appendingPathComponent("list.txt")
        try "\(base)/a.bin\n out=a.bin\n\(base)/b.bin\n out=b.bin\n".write(to: list, atomically: true, encoding: .utf8)
        let result = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-c", "-i", list.path, "--dir", out.path]
        )
        // A list never overwrites a file without --clobber: b is left as it was, and said so.
        #expect(result.status == 23, "\(result.stderrText)")
        #expect(try Data(contentsOf: out.appendingPathComponent("a.bin")) == a)
        #expect(try Data(contentsOf: out.appendingPathComponent("b.bin")) == a.prefix(500_000))
        #expect(result.stderrText.contains("a.bin' was not written by ferry; its last 65536 bytes are the server's"))
        #expect(
            result.stderrText.contains(
                "b.bin' was not written by ferry and cannot be continued: its last 65536 bytes are not the server's; left as it is (--clobber downloads it again)"
            ),
            "\(result.stderrText)"
        )
        let clobbered = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-c", "--clobber", "-i", list.path, "--dir", out.path]
        )
        #expect(clobbered.status == 0, "\(clobbered.stderrText)")
        #expect(try Data(contentsOf: out.appendingPathComponent("b.bin")) == b)
        #expect(clobbered.stderrText.contains("downloading it again from byte 0"))
    }

    /// Ferry's own kept bytes, continued against a server that ignores Range: it says that
    /// the server did (was "continued at byte 0 (0 bytes kept)").
    @Test(.enabled(if: enabled))
    func ownBytesAnsweredWithTheWholeFileSaySo() async throws {
        let root = try makeTemporaryDirectory("foreign-own-root")
        try await makeRandomFile(root.appendingPathComponent("f.bin"), mebibytes: 2)
        let nginx = try await Nginx(serving: root, server: "location /whole/ { alias \(root.path)/; max_ranges 0; }")
        defer { nginx.stop() }
        let expected = try Data(contentsOf: root.appendingPathComponent("f.bin"))
        let out = try makeTemporaryDirectory("foreign-own-out")
        let file = out.appendingPathComponent("f.bin")
        // Interrupted once its partial has bytes: ferry keeps them and their resume data.
        let pid = try ProcessRunner.spawn(
            ProcessRunner.ferry,
            ["get", "-q", "--limit-rate", "256k", "-o", file.path, "http://127.0.0.1:\(nginx.port)/f.bin"],
            stdout: out.appendingPathComponent("get.out").path,
            stderr: out.appendingPathComponent("get.err").path
        )
        var started = false
        for _ in 0..<6000 where !started {
            started = files(in: out).contains { name in
                name.hasSuffix(".partial")
                    && ((try? FileManager.default.attributesOfItem(atPath: out.appendingPathComponent(name).path))?[
                        .size
                    ]
                        as? Int ?? 0) > 0
            }
            if !started { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(started, "the download never wrote a byte")
        kill(pid, SIGINT)
        #expect(try await exitStatus(of: pid) == 130)
        try FileManager.default.removeItem(at: out.appendingPathComponent("get.out"))
        try FileManager.default.removeItem(at: out.appendingPathComponent("get.err"))
        try #require(files(in: out).contains { $0.hasSuffix(".partial") }, "ferry kept its bytes: \(files(in: out))")
        let again = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-c", "-o", file.path, "http://127.0.0.1:\(nginx.port)/whole/f.bin"]
        )
        #expect(again.status == 0, "\(again.stderrText)")
        #expect(try Data(contentsOf: file) == expected)
        #expect(
            again.stderrText.contains("started over from byte 0: the server ignored Range"),
            "\(again.stderrText)"
        )
    }
}
