import Ferry
import FerryBackground
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Chromium, chromedriver and Selenium: what the browser test needs.
enum Browser {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/web_page.py")
    static let largeScript = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/web_page_large.py")
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_CHROMIUM"] == "1" }
    static let isAvailable =
        FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")
        && FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver") && pythonCanImport("selenium")
    static var enabled: Bool { isAvailable || required }

    /// Where the screenshot for the README goes: `FERRY_SCREENSHOT`, else the package's
    /// `.build/screenshots/` (inside the checkout, never a system path).
    static var screenshot: URL {
        if let path = ProcessInfo.processInfo.environment["FERRY_SCREENSHOT"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/screenshots/web-page.png")
    }
}

/// A daemon started with `--web 127.0.0.1:0`, and the address `ferry web` prints.
struct WebDaemon {
    let daemon: DaemonProcess
    let pid: pid_t
    /// `http://127.0.0.1:PORT/?token=…`.
    let address: String
    var origin: String { String(address.prefix(while: { $0 != "?" }).dropLast()) }
    var token: String { String(address.split(separator: "=", maxSplits: 1)[1]) }
    var authority: String { String(origin.dropFirst("http://".count)) }

    static func started(_ options: [String] = []) async throws -> WebDaemon {
        let (daemon, pid) = try await DaemonProcess.started(["--web", "127.0.0.1:0"] + options)
        let web = try await daemon.ferry(["web"])
        let address = String(decoding: web.stdout, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(web.status == 0)
        #expect(address.hasPrefix("http://127.0.0.1:") && address.contains("/?token="))
        return WebDaemon(daemon: daemon, pid: pid, address: address)
    }

    /// curl's status code and body for a request with these extra arguments.
    func curl(_ path: String, _ arguments: [String] = []) async throws -> (status: Int, body: String) {
        let result = try await ProcessRunner.run(
            "/usr/bin/curl",
            ["-sS", "-o", "-", "-w", "\n%{http_code}"] + arguments + [origin + path]
        )
        let text = String(decoding: result.stdout, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }
}

@Suite struct WebPageTests {
    @Test func theTokenHostAndOriginAreCheckedOnEveryRequest() async throws {
        let web = try await WebDaemon.started()
        defer { DaemonProcess.killNine(web.pid) }
        let bearer = ["-H", "Authorization: Bearer \(web.token)"]

        // The token file is the daemon user's alone.
        let file = web.daemon.state.appendingPathComponent("web.url")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try String(contentsOf: file, encoding: .utf8).contains(web.token))
        // ...and never in the daemon's log (the journal, under systemd, is read by others).
        let log = try String(contentsOf: web.daemon.directory.appendingPathComponent("daemon.err"), encoding: .utf8)
        #expect(log.contains("web interface on"), "\(log)")
        #expect(!log.contains(web.token))

        // The page: with the token, under a policy that allows only itself.
        let headers = try await ProcessRunner.run("/usr/bin/curl", ["-sS", "-D", "-", web.address])
        let head = String(decoding: headers.stdout, as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200"))
        #expect(head.contains("Content-Security-Policy: default-src 'none'; script-src 'sha256-"))
        #expect(head.contains("X-Frame-Options: DENY"))
        #expect(head.contains("<form id=\"add\""))
        #expect(try await web.curl("/").status == 401)
        #expect(try await web.curl("/?token=\(web.token.dropLast())x").status == 401)

        // The API: the token as a bearer, nothing else.
        #expect(try await web.curl("/v1/tasks", bearer).status == 200)
        #expect(try await web.curl("/v1/tasks").status == 401)
        #expect(try await web.curl("/v1/tasks?token=\(web.token)").status == 401)
        #expect(try await web.curl("/v1/tasks", ["-H", "Authorization: Bearer nope"]).status == 401)

        // DNS rebinding: a name of the attacker's that resolves to 127.0.0.1.
        let port = web.authority.split(separator: ":")[1]
        let rebound = try await web.curl("/v1/tasks", bearer + ["-H", "Host: attacker.example:\(port)"])
        #expect(rebound.status == 403 && rebound.body.contains("foreignHost"))
        #expect(try await web.curl("/v1/tasks", bearer + ["-H", "Host: localhost:\(port)"]).status == 200)

        // Another site's page: refused whatever it asks, reads and changes alike.
        let daemon = web.daemon
        let id = try await daemon.add(
            ["http://127.0.0.1:9/later", "-o", daemon.directory.path + "/later.bin", "--start-after", "3600"]
        )
        let foreign = ["-H", "Origin: http://attacker.example"]
        let post = ["-X", "POST", "-H", "Content-Type: application/json", "-d", "{}"]
        let cancel = try await web.curl("/v1/tasks/\(id)/cancel", bearer + foreign + post)
        #expect(cancel.status == 403 && cancel.body.contains("foreignOrigin"))
        #expect(try await web.curl("/v1/tasks", bearer + ["-H", "Sec-Fetch-Site: cross-site"]).status == 403)
        #expect(try await web.curl("/v1/tasks", bearer + ["-X", "OPTIONS"]).status == 403)
        #expect(try await daemon.client.task(id).state != .canceled)
        // Our own page's origin, and a script's request with none, are served.
        let own = ["-H", "Origin: \(web.origin)"]
        #expect(try await web.curl("/v1/tasks/\(id)/pause", bearer + own + post).status == 200)
        #expect(try await web.curl("/v1/tasks/\(id)/cancel", bearer + post).status == 200)
        #expect(try await daemon.client.task(id).state == .canceled)
    }

    @Test func onlyLoopbackAddressesAreServed() async throws {
        let daemon = try DaemonProcess()
        for address in ["0.0.0.0:0", "192.168.1.1:8080", "example.com:80", "[::]:0", "6801x"] {
            let result = try await daemon.ferry(["daemon", "--web", address])
            #expect(result.status != 0, "ferry daemon --web \(address) started")
            #expect(String(decoding: result.stderr, as: UTF8.self).contains("--web takes a loopback address"))
        }
        // A port already taken: the daemon says so and stops, rather than run without it.
        let taken = try await WebDaemon.started()
        defer { DaemonProcess.killNine(taken.pid) }
        let second = try await daemon.ferry(["daemon", "--web", taken.authority])
        #expect(second.status != 0)
        #expect(second.stderrText.contains("The web page cannot listen on \(taken.authority)"))
        #expect(!FileManager.default.fileExists(atPath: daemon.state.appendingPathComponent("web.url").path))

        // Without --web there is no page, and `ferry web` says so.
        let (plain, pid) = try await DaemonProcess.started()
        defer { DaemonProcess.killNine(pid) }
        let web = try await plain.ferry(["web"])
        #expect(web.status != 0)
        #expect(String(decoding: web.stderr, as: UTF8.self).contains("--web"))
    }

    @Test(.enabled(if: Browser.enabled && Nginx.enabled, "needs chromium, chromedriver, selenium and nginx"))
    func aBrowserAddsPausesResumesAndCompletesADownload() async throws {
        let root = try makeTemporaryDirectory("web-root")
        let content = TestContent.data(size: 12 * 1_048_576, seed: 17)
        try content.write(to: root.appendingPathComponent("big.bin"))
        try Data("<!doctype html><title>elsewhere</title>".utf8).write(to: root.appendingPathComponent("index.html"))
        let nginx = try await Nginx(serving: root)
        defer { nginx.stop() }
        // 12 MiB at 1 MiB/s: time to see it move, pause and resume it.
        let web = try await WebDaemon.started(["--limit-rate", "1M"])
        defer { DaemonProcess.killNine(web.pid) }
        let folder = try makeTemporaryDirectory("web-downloads")
        let screenshot = web.daemon.directory.appendingPathComponent("web-page.png")

        let run = try await ProcessRunner.run(
            "/usr/bin/env",
            [
                "python3", Browser.script.path, web.address, "http://127.0.0.1:\(nginx.port)/big.bin", folder.path,
                screenshot.path, "http://127.0.0.1:\(nginx.port)/index.html",
            ]
        )
        let output = String(decoding: run.stdout, as: UTF8.self)
        try #require(run.status == 0, "\(output)\(String(decoding: run.stderr, as: UTF8.self))")
        let seen = try #require(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        #expect(seen["withoutToken"] as? Int == 401)
        #expect((seen["rate"] as? String)?.hasSuffix("/s") == true)
        let pausedAt = try #require(seen["pausedAt"] as? Int)
        #expect(pausedAt > 0 && pausedAt < content.count)
        #expect(seen["completedBytes"] as? Int == content.count)
        #expect((seen["foreignRead"] as? String)?.hasPrefix("blocked") == true)

        // The hostile POST cleaned nothing away; the page's own button did.
        #expect(seen["statesAfterForeignPost"] as? [String] == ["canceled", "completed"])
        #expect(seen["afterClear"] as? String == "Cleared 2 finished.")
        #expect(try await web.daemon.client.tasks().isEmpty)

        // The file is whole and the resume continued with a range; the cancelled one left
        // nothing at its destination.
        #expect(try Data(contentsOf: folder.appendingPathComponent("from-the-page.bin")) == content)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("cancelled.bin").path))
        let log = try String(contentsOf: nginx.accessLog, encoding: .utf8)
        #expect(log.contains("GET /big.bin 206"))

        let kept = Browser.screenshot
        try? FileManager.default.createDirectory(
            at: kept.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try? FileManager.default.removeItem(at: kept)
        try FileManager.default.copyItem(at: screenshot, to: kept)
        let png = try Data(contentsOf: kept)
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
    }

    /// With 100,000 tasks stored the page fetches a page, not the store: the first page is
    /// shown within 2 s of the navigation (the page's own clock), with the totals, and the
    /// next and previous pages follow the list's order.
    @Test(.enabled(if: Browser.enabled, "needs chromium, chromedriver and selenium"))
    func aHundredThousandTasksShowAPageAtOnce() async throws {
        let web = try await WebDaemon.started()
        defer { DaemonProcess.killNine(web.pid) }
        let folder = web.daemon.directory.appendingPathComponent("never", isDirectory: true)
        let count = 100_000
        var ids: [Int64] = []
        for start in stride(from: 0, to: count, by: BackgroundAPI.AddTasks.maximumCount) {
            let batch = (start..<min(count, start + BackgroundAPI.AddTasks.maximumCount)).map { index in
                var task = BackgroundAPI.AddTask(
                    url: "http://127.0.0.1:9/f\(index)",
                    destination: folder.appendingPathComponent("f\(index)").path
                )
                task.earliestBeginDate = Date(timeIntervalSinceNow: 3600)
                return task
            }
            ids += try await web.daemon.client.add(batch)
        }
        #expect(ids.count == count)
        let run = try await ProcessRunner.run(
            "/usr/bin/env",
            ["python3", Browser.largeScript.path, web.address, "100"]
        )
        let output = String(decoding: run.stdout, as: UTF8.self)
        try #require(run.status == 0, "\(output)\(String(decoding: run.stderr, as: UTF8.self))")
        let seen = try #require(try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any])
        let shown = try #require(seen["shownAfterSeconds"] as? Double)
        #expect(shown < 2, "the first page was shown \(shown) s after the navigation began")
        #expect((seen["firstPage"] as? [Int])?.map(Int64.init) == Array(ids.prefix(100)))
        #expect((seen["secondPage"] as? [Int])?.map(Int64.init) == Array(ids.dropFirst(100).prefix(100)))
        #expect((seen["backToFirst"] as? [Int])?.map(Int64.init) == Array(ids.prefix(100)))
        #expect((seen["summary"] as? String)?.hasPrefix("100000 queued") == true, "\(seen["summary"] ?? "")")
    }
}
