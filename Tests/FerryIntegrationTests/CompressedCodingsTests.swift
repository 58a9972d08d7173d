import Ferry
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `ferry get --compressed` with `br` and `zstd` beside `curl --compressed`, against Caddy
/// (a server nobody here wrote) serving files it keeps precompressed by Debian's `brotli`
/// and `zstd` tools: the same decoded files, bombs refused as gzip's are, a truncated
/// stream refused (curl 7.88 keeps what it decoded of it and exits 0).
@Suite("br and zstd against Caddy, beside curl", .serialized)
struct CompressedCodingsTests {
    static let curl = "/usr/bin/curl"
    static var enabled: Bool {
        let tools = ["/usr/bin/caddy", "/usr/bin/brotli", "/usr/bin/zstd", curl]
        return tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
            || ProcessInfo.processInfo.environment["FERRY_REQUIRE_CADDY"] == "1"
    }

    /// Caddy serving `root`, preferring `zstd` then `br` where a `.zst` or `.br` sidecar is.
    static func caddy(serving root: URL) async throws -> ServerProcess {
        let caddyfile = """
            {
                admin off
                auto_https off
                storage file_system DIR/storage
            }
            http://127.0.0.1:PORT {
                root * \(root.path)
                file_server {
                    precompressed zstd br
                }
            }
            """
        // Its configuration and data go to its own directory, not the home's.
        return try await ServerProcess(
            "/usr/bin/env",
            [
                "XDG_CONFIG_HOME=DIR", "XDG_DATA_HOME=DIR", "/usr/bin/caddy", "run", "--config", "DIR/Caddyfile",
                "--adapter", "caddyfile",
            ],
            files: ["Caddyfile": caddyfile]
        )
    }

    /// `file` with its `.br` and `.zst` sidecars.
    static func precompress(_ file: URL) async throws {
        for tool in [["/usr/bin/brotli", "-q", "5", "-k", "-f"], ["/usr/bin/zstd", "-q", "-k", "-f"]] {
            let made = try await ProcessRunner.run(tool[0], Array(tool.dropFirst()) + [file.path])
            try #require(made.status == 0, "\(tool[0]): \(made.stderrText)")
        }
    }

    @Test(.enabled(if: enabled))
    func eachCodingDecodesToTheSameFileAsCurls() async throws {
        let root = try makeTemporaryDirectory("codings-root")
        let original = root.appendingPathComponent("notes.txt")
        let words = ["ferry", "river", "bank", "rope", "tide"]
        var text = ""
        // Text as text compresses, ten- to twentyfold: numbered lines.
        for index in 0..<60_000 { text += "\(index * 7919 % 100_003) " + words[(index * 7 + index / 3) % 5] + "\n" }
        try Data(text.utf8).write(to: original)
        try await Self.precompress(original)
        let caddy = try await Self.caddy(serving: root)
        defer { caddy.stop() }
        let url = "http://127.0.0.1:\(caddy.port)/notes.txt"
        let expected = try Data(contentsOf: original)
        let out = try makeTemporaryDirectory("codings-out")
        for coding in ["br", "zstd"] {
            let ours = out.appendingPathComponent("ferry-\(coding)")
            let theirs = out.appendingPathComponent("curl-\(coding)")
            let asked = ["-H", "Accept-Encoding: \(coding)", "-w", "%header{content-encoding}"]
            let ferry = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--compressed", "-o", ours.path] + asked + [url]
            )
            let curl = try await ProcessRunner.run(
                Self.curl,
                ["-s", "--compressed", "-o", theirs.path] + asked + [url]
            )
            #expect(ferry.status == 0 && curl.status == 0, "\(coding): \(ferry.stderrText)")
            #expect(ferry.stdoutText == coding && curl.stdoutText == coding, "Caddy sent \(coding)")
            #expect(try Data(contentsOf: ours) == expected, "ferry's \(coding) file")
            #expect(try Data(contentsOf: theirs) == expected, "curl's \(coding) file")
        }
        // Unasked, ferry offers what it decodes, as curl does; to a file the four codings.
        let offered = try await ProcessRunner.run(
            ProcessRunner.ferry,
            ["get", "-v", "--compressed", "-o", out.appendingPathComponent("offered").path, url]
        )
        #expect(offered.status == 0)
        #expect(offered.stderrText.contains("> Accept-Encoding: gzip, deflate, br, zstd\n"), "\(offered.stderrText)")
        #expect(offered.stderrText.contains("< Content-Encoding: zstd\n"))
        #expect(try Data(contentsOf: out.appendingPathComponent("offered")) == expected)
        // To standard output the body decodes as it streams.
        for coding in ["br", "zstd"] {
            let streamed = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "-q", "--compressed", "-H", "Accept-Encoding: \(coding)", url]
            )
            #expect(streamed.status == 0, "\(streamed.stderrText)")
            #expect(streamed.stdout == expected, "\(coding) to standard output")
        }
    }

    /// The library: data tasks and streamed bodies of a session that decodes
    /// (`automaticDecompression`) ask for br and zstd and get them decoded, capped by
    /// `maximumInMemoryBodySize` as gzip's are; a session that does not gets the bytes sent.
    @Test(.enabled(if: enabled))
    func dataTasksAndStreamsDecodeThemToo() async throws {
        let root = try makeTemporaryDirectory("codings-data")
        let original = root.appendingPathComponent("data.txt")
        let text = (0..<40_000).map { "entry \($0 * 31 % 9973) of the log\n" }.joined()
        try Data(text.utf8).write(to: original)
        try await Self.precompress(original)
        let zeros = root.appendingPathComponent("zeros.bin")
        try Data(count: 8_000_000).write(to: zeros)
        try await Self.precompress(zeros)
        let caddy = try await Self.caddy(serving: root)
        defer { caddy.stop() }
        let url = try #require(URL(string: "http://127.0.0.1:\(caddy.port)/data.txt"))
        var configuration = SessionConfiguration.ephemeral
        configuration.automaticDecompression = true
        configuration.maximumInMemoryBodySize = 4_000_000
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        for coding in ["br", "zstd"] {
            var request = URLRequest(url: url)
            request.setValue(coding, forHTTPHeaderField: "Accept-Encoding")
            let (data, response) = try await session.data(for: request)
            #expect(response.headers["Content-Encoding"] == coding)
            #expect(data == Data(text.utf8), "data(for:) decodes \(coding)")
            let (bytes, _) = try await session.bytes(for: request)
            var streamed = Data()
            for try await chunk in bytes.chunks { streamed.append(contentsOf: chunk) }
            #expect(streamed == Data(text.utf8), "bytes(for:) decodes \(coding)")
            // 8 MB of zeros inflate past the 4 MB in memory: refused while they inflate.
            var bomb = URLRequest(url: url.deletingLastPathComponent().appendingPathComponent("zeros.bin"))
            bomb.setValue(coding, forHTTPHeaderField: "Accept-Encoding")
            do {
                _ = try await session.data(for: bomb)
                Issue.record("\(coding): 8 MB of zeros passed a 4 MB limit")
            } catch {
                #expect(error.reason == .bodyTooLarge(limit: 4_000_000), "\(error)")
            }
        }
        // Unasked, a decoding session offers what it decodes.
        let (_, offered) = try await session.data(from: url)
        #expect(offered.headers["Content-Encoding"] == "zstd")
        // A session that does not decode sends identity and gets the bytes as stored.
        let plain = try Session(configuration: .ephemeral)
        defer { plain.invalidateAndCancel() }
        let (stored, head) = try await plain.data(from: url)
        #expect(head.headers["Content-Encoding"] == nil)
        #expect(stored == Data(text.utf8))
    }

    @Test(.enabled(if: enabled))
    func bombsAndTruncatedStreamsLeaveNoFile() async throws {
        let root = try makeTemporaryDirectory("codings-bombs")
        // 20 MB of zeros: each coding makes it a few kilobytes (thousands-fold).
        let zeros = root.appendingPathComponent("zeros.bin")
        try Data(count: 20_000_000).write(to: zeros)
        try await Self.precompress(zeros)
        // A text whose zstd sidecar lost its second half.
        let text = root.appendingPathComponent("cut.txt")
        try Data((0..<200_000).map { "line \($0)\n" }.joined().utf8).write(to: text)
        try await Self.precompress(text)
        let zst = root.appendingPathComponent("cut.txt.zst")
        let whole = try Data(contentsOf: zst)
        try whole.prefix(whole.count / 2).write(to: zst)
        let caddy = try await Self.caddy(serving: root)
        defer { caddy.stop() }
        let out = try makeTemporaryDirectory("codings-bombs-out")
        /// `ferry get --compressed` of `path` in `coding` to `file`, with `options`.
        func get(_ path: String, _ coding: String, to file: URL, _ options: [String] = []) async throws -> ProcessResult
        {
            try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["get", "--compressed", "-H", "Accept-Encoding: \(coding)", "-o", file.path] + options
                    + ["http://127.0.0.1:\(caddy.port)/\(path)"]
            )
        }
        for coding in ["br", "zstd"] {
            let file = out.appendingPathComponent("zeros-\(coding)")
            let ferry = try await get("zeros.bin", coding, to: file)
            #expect(ferry.status == 63, "\(coding): \(ferry.stderrText)")
            #expect(ferry.stderrText.contains("inflates more than 200-fold"), "\(ferry.stderrText)")
            #expect(!FileManager.default.fileExists(atPath: file.path))
            // --max-filesize is then the limit, as for gzip: 20 MB fit in 30M.
            let allowed = try await get("zeros.bin", coding, to: file, ["-q", "--max-filesize", "30M"])
            #expect(allowed.status == 0, "\(allowed.stderrText)")
            #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? Int == 20_000_000)
        }
        let cut = out.appendingPathComponent("cut")
        let ferry = try await get("cut.txt", "zstd", to: cut)
        #expect(ferry.status == 8, "\(ferry.stderrText)")
        #expect(ferry.stderrText.contains("zstd body ends before its stream does"), "\(ferry.stderrText)")
        #expect(!FileManager.default.fileExists(atPath: cut.path))
    }
}
