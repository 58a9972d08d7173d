import Ferry
import FerryTestServer
import Foundation
import Testing

/// curl's config files beside curl 7.88: the same file to `-K`, the default one
/// (`~/.ferryrc` for ferry, `~/.curlrc` for curl) and `-q` that skips it, `-K -`.
@Suite("Config files, side by side with curl")
struct ConfigFileTests {
    static let curl = "/usr/bin/curl"
    static var curlInstalled: Bool { FileManager.default.isExecutableFile(atPath: curl) }

    /// Runs `program ARGUMENTS` in `directory` through a shell (for `-K -`, `input` is piped in).
    func run(
        _ program: String,
        _ arguments: [String],
        in directory: URL,
        home: URL? = nil,
        input: String? = nil
    ) async throws -> ProcessResult {
        let pipe = input.map { "printf '%s' '\($0)' | " } ?? ""
        return try await ProcessRunner.run(
            "/bin/sh",
            ["-c", "cd '\(directory.path)' && \(pipe)exec '\(program)' \"$@\"", "sh"] + arguments,
            environment: home.map { ["HOME": $0.path, "XDG_CONFIG_HOME": $0.appendingPathComponent(".config").path] }
                ?? [:]
        )
    }

    @Test(.enabled(if: curlInstalled))
    func theSameConfigFileDoesTheSame() async throws {
        try await withServer { server in
            let config = """
                # what curl and ferry both read
                url = "\(server.url("/redirect/1?to=/bytes/1000%3Fseed=6").absoluteString)"
                output = "out.bin"
                header = "X-Config: yes"
                silent
                location
                retry 2
                write-out = "%{http_code} %{size_download} %{num_redirects}\\n"

                """
            var results: [ProcessResult] = []
            for program in [ProcessRunner.ferry, Self.curl] {
                let directory = try makeTemporaryDirectory("config")
                try config.write(to: directory.appendingPathComponent("cfg"), atomically: true, encoding: .utf8)
                let arguments = program == Self.curl ? ["-K", "cfg"] : ["get", "-K", "cfg"]
                let result = try await run(program, arguments, in: directory)
                results.append(result)
                #expect(result.status == 0, "\(result.stderrText)")
                #expect(
                    try Data(contentsOf: directory.appendingPathComponent("out.bin"))
                        == TestContent.data(size: 1000, seed: 6)
                )
            }
            #expect(results[0].stdoutText == "200 1000 1\n")
            #expect(results[0].stdoutText == results[1].stdoutText)
            #expect(
                server.requests.filter { $0.uri.hasPrefix("/bytes/1000") && $0.headers["x-config"] == "yes" }.count == 2
            )
        }
    }

    @Test(.enabled(if: curlInstalled))
    func theDefaultFileIsReadUnlessQComesFirst() async throws {
        try await withServer { server in
            let home = try makeTemporaryDirectory("config-home")
            try "header = \"X-Default: 1\"\n".write(
                to: home.appendingPathComponent(".ferryrc"),
                atomically: true,
                encoding: .utf8
            )
            try "header = \"X-Default: 1\"\n".write(
                to: home.appendingPathComponent(".curlrc"),
                atomically: true,
                encoding: .utf8
            )
            let directory = try makeTemporaryDirectory("config-default")
            func sent(_ marker: String) -> String? {
                server.requests.first { $0.uri.contains("who=\(marker)") }?.headers["x-default"]
            }
            let url = { (who: String) in server.url("/bytes/10?who=\(who)").absoluteString }
            let ferry = try await run(ProcessRunner.ferry, ["get", "-o", "f", url("ferry")], in: directory, home: home)
            let curl = try await run(Self.curl, ["-s", "-o", "c", url("curl")], in: directory, home: home)
            #expect(ferry.status == 0 && curl.status == 0)
            #expect(sent("ferry") == "1" && sent("curl") == "1")
            let skipped = try await run(
                ProcessRunner.ferry,
                ["get", "-q", "-o", "f2", url("ferry-q")],
                in: directory,
                home: home
            )
            let curlSkipped = try await run(
                Self.curl,
                ["-q", "-s", "-o", "c2", url("curl-q")],
                in: directory,
                home: home
            )
            #expect(skipped.status == 0 && curlSkipped.status == 0)
            #expect(sent("ferry-q") == nil && sent("curl-q") == nil)
            // The XDG place wins over ~/.ferryrc.
            let xdg = home.appendingPathComponent(".config/ferry", isDirectory: true)
            try FileManager.default.createDirectory(at: xdg, withIntermediateDirectories: true)
            try "header = \"X-Default: xdg\"\n".write(
                to: xdg.appendingPathComponent("config"),
                atomically: true,
                encoding: .utf8
            )
            _ = try await run(ProcessRunner.ferry, ["get", "-o", "f3", url("ferry-xdg")], in: directory, home: home)
            #expect(sent("ferry-xdg") == "xdg")
        }
    }

    @Test(.enabled(if: curlInstalled))
    func configFromStandardInputAndAFileThatCannotBeRead() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("config-stdin")
            let line = "url = \"\(server.url("/bytes/77?seed=2").absoluteString)\""
            let ferry = try await run(
                ProcessRunner.ferry,
                ["get", "-q", "-K", "-", "-o", "f"],
                in: directory,
                input: line
            )
            let curl = try await run(Self.curl, ["-s", "-K", "-", "-o", "c"], in: directory, input: line)
            #expect(ferry.status == 0 && curl.status == 0)
            let expected = TestContent.data(size: 77, seed: 2)
            #expect(try Data(contentsOf: directory.appendingPathComponent("f")) == expected)
            #expect(try Data(contentsOf: directory.appendingPathComponent("c")) == expected)
            let missing = try await run(ProcessRunner.ferry, ["get", "-K", "absent", "-o", "g"], in: directory)
            let curlMissing = try await run(Self.curl, ["-s", "-K", "absent", "-o", "h"], in: directory)
            #expect(missing.status == 26 && curlMissing.status == 26)
            #expect(missing.stderrText.contains("absent"))
        }
    }
}
