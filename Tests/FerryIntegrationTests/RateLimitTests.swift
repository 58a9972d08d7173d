import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Seconds `work` took.
private func seconds(_ work: () async throws -> Void) async rethrows -> Double {
    let start = ContinuousClock.now
    try await work()
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// Bandwidth limits. Each test checks that the limit holds as a lower bound on the time
/// taken (a loaded machine only makes it slower, never faster); how close to the rate a
/// transfer stays is measured by the benchmark, not here.
@Suite("Bandwidth limits", .serialized)
struct RateLimitTests {
    @Test func aTasksLimitHoldsForADownloadAndAnUpload() async throws {
        try await withServer { server in
            let session = try makeSession()
            let output = try makeTemporaryDirectory("rate").appendingPathComponent("out.bin")
            // 3 MB at 1 MB/s: at least 2.9 s (a tenth of a second may run ahead).
            let download = session.downloadTask(with: server.url("/bytes/3000000?seed=2"), to: .file(output))
            download.maximumBytesPerSecond = 1_000_000
            let took = await seconds {
                download.resume()
                _ = await completion(of: download)
            }
            #expect(download.error == nil)
            #expect(took >= 2.8, "3 MB at 1 MB/s took \(took) s")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 3_000_000, seed: 2))

            let upload = session.uploadTask(
                with: URLRequest(url: server.url("/sink"), method: .put),
                from: TestContent.data(size: 2_000_000, seed: 3)
            )
            upload.maximumBytesPerSecond = 1_000_000
            let sent = await seconds {
                upload.resume()
                _ = await completion(of: upload)
            }
            #expect(upload.error == nil)
            #expect(sent >= 1.5, "2 MB at 1 MB/s took \(sent) s")
        }
    }

    @Test func aSessionsLimitIsSharedByItsTasks() async throws {
        try await withServer { server in
            let session = try makeSession { $0.maximumBytesPerSecond = 1_000_000 }
            let took = try await seconds {
                async let first = session.data(from: server.url("/bytes/1500000?seed=4"))
                async let second = session.data(from: server.url("/bytes/1500000?seed=5"))
                let (a, b) = try await (first, second)
                #expect(a.0 == TestContent.data(size: 1_500_000, seed: 4))
                #expect(b.0 == TestContent.data(size: 1_500_000, seed: 5))
            }
            #expect(took >= 2.8, "two 1.5 MB bodies under one 1 MB/s limit took \(took) s")
        }
    }
}

@Suite("Bandwidth limits against nginx, beside curl", .serialized, .enabled(if: Nginx.enabled))
struct RateLimitNginxTests {
    @Test func ferryGetLimitRateBesideCurl() async throws {
        let root = try makeTemporaryDirectory("rate-nginx")
        defer { try? FileManager.default.removeItem(at: root) }
        try await makeRandomFile(root.appendingPathComponent("three.bin"), mebibytes: 3)
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        let url = "http://127.0.0.1:\(nginx.port)/three.bin"
        var results: [String: Double] = [:]
        for (name, command, arguments) in [
            (
                "ferry", ProcessRunner.ferry,
                ["get", "-q", "--limit-rate", "1M", "-o", root.appendingPathComponent("ferry.out").path, url]
            ),
            (
                "curl", "/usr/bin/curl",
                ["-sS", "--limit-rate", "1M", "-o", root.appendingPathComponent("curl.out").path, url]
            ),
        ] {
            let took = try await seconds {
                let result = try await ProcessRunner.run(command, arguments)
                #expect(result.status == 0, "\(name): \(result.stderrText)")
            }
            results[name] = took
        }
        // 3 MiB at 1 MiB/s: ferry at least 2.8 s. (curl paces its reads too, but on
        // loopback the kernel's socket buffers hold megabytes it has not paced: its time is
        // printed, not bounded.)
        #expect((results["ferry"] ?? 0) >= 2.8, "\(results)")
        print("--limit-rate 1M of 3 MiB from nginx: \(results)")
        let original = try await sha256(of: root.appendingPathComponent("three.bin"))
        #expect(try await sha256(of: root.appendingPathComponent("ferry.out")) == original)
        #expect(try await sha256(of: root.appendingPathComponent("curl.out")) == original)
    }
}

@Suite("ferry put --limit-rate", .serialized)
struct UploadRateLimitCLITests {
    @Test func ferryPutLimitRateHoldsForTheUpload() async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("rate-put")
            let file = directory.appendingPathComponent("body.bin")
            try TestContent.data(size: 2_000_000, seed: 8).write(to: file)
            var result: ProcessResult?
            let took = try await seconds {
                result = try await ProcessRunner.run(
                    ProcessRunner.ferry,
                    ["put", "--quiet", "--limit-rate", "1M", file.path, server.url("/sink").absoluteString]
                )
            }
            #expect(result?.status == 0, "\(result?.stderrText ?? "")")
            #expect(result?.stdoutText.contains(TestContent.sha256(size: 2_000_000, seed: 8)) == true)
            // 2 MB at 1 MiB/s: at least 1.7 s.
            #expect(took >= 1.7, "2 MB at 1 MiB/s took \(took) s")
        }
    }
}

@Suite("ferry daemon --limit-rate", .serialized)
struct DaemonRateLimitTests {
    @Test func theDaemonsLimitHoldsForItsTransfers() async throws {
        try await withServer { server in
            let (daemon, pid) = try await DaemonProcess.started(["--limit-rate", "1M"])
            defer { DaemonProcess.killNine(pid) }
            let output = daemon.directory.appendingPathComponent("out/limited.bin")
            let start = ContinuousClock.now
            let id = try await daemon.add([server.url("/bytes/3000000?seed=6").absoluteString, "-o", output.path])
            let wait = try await daemon.ferry(["wait", "-q", "\(id)"])
            let took = ContinuousClock.now - start
            #expect(wait.status == 0, "\(wait.stderrText)")
            #expect(took >= .seconds(2.5), "3 MB at 1 MiB/s took \(took)")
            #expect(try Data(contentsOf: output) == TestContent.data(size: 3_000_000, seed: 6))
        }
    }
}
