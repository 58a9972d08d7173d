import Ferry
import FerryBackground
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// Apple's server of resumable uploads (swift-nio-extras' `NIOResumableUpload`, built as the
/// package's `resumable-upload-server`), and a relay that cuts connections
/// (Support/cutting_relay.py).
enum ResumableUploadServer {
    static var executable: String {
        ProcessRunner.productsDirectory.appendingPathComponent("resumable-upload-server").path
    }
    static let relay = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/cutting_relay.py")

    /// Starts the server storing into `directory`; with `cutEvery`, a relay in front of it
    /// that cuts every that many bytes. `body` gets the URL to upload to (through the relay
    /// when there is one) and the relay.
    static func with(
        storingIn directory: URL,
        cutEvery: Int? = nil,
        _ body: (URL, ServerProcess?) async throws -> Void
    ) async throws {
        let (server, relay) = try await relayed(cutEvery: cutEvery) { origin in
            try await ServerProcess(executable, ["PORT", directory.path] + (origin.map { [$0] } ?? []))
        }
        defer {
            server.stop()
            relay?.stop()
        }
        let port = relay?.port ?? server.port
        try await body(try #require(URL(string: "http://127.0.0.1:\(port)/files/upload.bin")), relay)
    }

    /// Starts a server whose upload resources are on `origin`; with `cutEvery`, behind a
    /// cutting relay that is its origin.
    ///
    /// The relay starts first, on a port it is seen to listen on, and reads the server's port
    /// from a file when a connection comes. A port picked for the relay before the server
    /// started could be taken by another test's server before the relay bound it: the relay
    /// then ended, the probe was answered by the other server, and the upload was refused
    /// once that server had stopped.
    ///
    /// - Parameters:
    ///   - cutEvery: Where the relay cuts (``Support/cutting_relay.py``), or `nil` for no relay.
    ///   - start: Starts the server, given the origin to name (`nil`: its own).
    /// - Returns: The server, and the relay if there is one; the caller stops both.
    static func relayed(
        cutEvery: Int?,
        _ start: (String?) async throws -> ServerProcess
    ) async throws -> (server: ServerProcess, relay: ServerProcess?) {
        guard let cutEvery else { return (try await start(nil), nil) }
        let relay = try await ServerProcess(
            "/usr/bin/env",
            ["python3", Self.relay.path, "PORT", "@DIR/target", "\(cutEvery)"]
        )
        do {
            let server = try await start("http://127.0.0.1:\(relay.port)")
            try relay.write("\(server.port)", toFile: "target")
            return (server, relay)
        } catch {
            relay.stop()
            throw error
        }
    }

    /// The bytes the relay forwarded to the server in all, and the cuts it made, from its
    /// latest report.
    static func forwarded(_ relay: ServerProcess) -> (bytes: Int, cuts: Int)? {
        guard let line = relay.output.split(separator: "\n").last(where: { $0.hasPrefix("forwarded ") }) else {
            return nil
        }
        let words = line.split(separator: " ")
        guard words.count == 4, let bytes = Int(words[1]), let cuts = Int(words[3]) else { return nil }
        return (bytes, cuts)
    }
}

/// Uploads that resume (draft-ietf-httpbis-resumable-upload), against Apple's server.
@Suite("Resumable uploads against Apple's NIOResumableUpload", .serialized)
struct ResumableUploadTests {
    func post(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = "POST"
        request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
        return request
    }

    /// An upload the server takes whole: the stored file is the body, and the answer is the
    /// application's (not the protocol's).
    @Test func anUploadToTheServerIsStoredWhole() async throws {
        let directory = try makeTemporaryDirectory("resumable-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let source = try makeTemporaryDirectory("resumable-source").appendingPathComponent("body.bin")
        defer { try? FileManager.default.removeItem(at: source.deletingLastPathComponent()) }
        let body = TestContent.data(size: 3 << 20, seed: 28)
        try body.write(to: source)
        try await ResumableUploadServer.with(storingIn: directory) { url, _ in
            let session = try makeSession()
            defer { session.invalidateAndCancel() }
            let (reply, response) = try await session.upload(for: post(url), fromFile: source)
            #expect(response.statusCode == 201)
            #expect(String(decoding: reply, as: UTF8.self) == "stored \(body.count)\n")
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
        }
    }

    /// Through a relay that cuts the connection every 5 MiB: the upload continues from the
    /// server's offset each time, the stored file is byte-identical, and the server was sent
    /// at most the body plus one chunk (256 KiB) per cut.
    @Test func anUploadCutEveryFiveMiBContinuesFromTheServersOffset() async throws {
        let directory = try makeTemporaryDirectory("resumable-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let size = 24 << 20
        let body = TestContent.data(size: Int64(size), seed: 29)
        let cut = 5 << 20
        try await ResumableUploadServer.with(storingIn: directory, cutEvery: cut) { url, relay in
            let session = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 3, baseDelay: 0) }
            defer { session.invalidateAndCancel() }
            let task = session.uploadTask(with: post(url), from: body)
            let events = task.events
            task.resume()
            var offsets: [Int64] = []
            var retries = 0
            for await event in events {
                switch event {
                case .resumedAtOffset(let offset, _): offsets.append(offset)
                case .willRetry: retries += 1
                default: break
                }
            }
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(task.response?.statusCode == 201)
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            let relay = try #require(relay)
            let relayed = try #require(ResumableUploadServer.forwarded(relay))
            #expect(relayed.cuts == size / cut)
            #expect(retries == relayed.cuts)
            #expect(offsets.count == relayed.cuts)
            #expect(offsets == offsets.sorted() && offsets.allSatisfy { $0 > 0 })
            // Request heads are under 1 KiB each; bodies never repeat more than a chunk per cut.
            #expect(relayed.bytes <= size + relayed.cuts * (256 << 10) + 64 * 1024, "\(relayed)")
        }
    }

    /// A failed upload carries resume data; a new session continues from the server's
    /// offset, and the server is sent each byte about once.
    @Test func aFailedUploadsResumeDataContinuesIt() async throws {
        let directory = try makeTemporaryDirectory("resumable-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let scratch = try makeTemporaryDirectory("resumable-source")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let source = scratch.appendingPathComponent("body.bin")
        let size = 8 << 20
        let body = TestContent.data(size: Int64(size), seed: 35)
        try body.write(to: source)
        try await ResumableUploadServer.with(storingIn: directory, cutEvery: 3 << 20) { url, relay in
            let failing = try makeSession { $0.retryPolicy = .none }
            defer { failing.invalidateAndCancel() }
            let error = await #expect(throws: FerryError.self) {
                try await failing.upload(for: post(url), fromFile: source)
            }
            #expect(error?.reason == .network, "\(String(describing: error))")
            let resume = try #require(error?.uploadResumeData)
            #expect(resume.sourceFile == source)
            #expect(resume.interopVersion == 6)
            #expect(resume.totalLength == Int64(size))
            #expect(resume.bytesSent <= Int64(size))
            // It travels as JSON, as a program that stops would keep it.
            let decoded = try UploadResumeData(decoding: resume.encoded())
            #expect(decoded == resume)

            let session = try makeSession()
            defer { session.invalidateAndCancel() }
            let (reply, response) = try await session.upload(resumingWith: decoded)
            #expect(response.statusCode == 201)
            #expect(String(decoding: reply, as: UTF8.self) == "stored \(size)\n")
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            let relay = try #require(relay)
            let relayed = try #require(ResumableUploadServer.forwarded(relay))
            #expect(relayed.cuts == 2)
            #expect(relayed.bytes <= size + relayed.cuts * (256 << 10) + 64 * 1024, "\(relayed)")
        }
    }

    // MARK: ferry put

    /// `ferry put` through a relay that cuts every 3 MiB: it continues each time, and
    /// `--json` says where.
    @Test func ferryPutContinuesAfterEachCutAndSaysWhere() async throws {
        let directory = try makeTemporaryDirectory("resumable-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let scratch = try makeTemporaryDirectory("resumable-put")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let source = scratch.appendingPathComponent("video.bin")
        let body = TestContent.data(size: 10 << 20, seed: 37)
        try body.write(to: source)
        try await ResumableUploadServer.with(storingIn: directory, cutEvery: 3 << 20) { url, _ in
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                [
                    "put", "--json", "-X", "POST", "-o", scratch.appendingPathComponent("reply").path, source.path,
                    url.absoluteString,
                ]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            let events = String(decoding: result.stdout, as: UTF8.self).split(separator: "\n")
            let resumed = events.filter { $0.contains("\"resumedAtOffset\"") }
            #expect(resumed.count == 3, "\(events)")
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            #expect(
                try String(contentsOf: scratch.appendingPathComponent("reply"), encoding: .utf8)
                    == "stored \(body.count)\n"
            )
            #expect(files(in: scratch) == ["reply", "video.bin"])
        }
    }

    /// `kill -9` of `ferry put` half-way, then `ferry put -c`: the upload continues from the
    /// server's offset, the stored file is identical, and the server was sent each byte once
    /// (counted by a relay that never cuts).
    @Test func killDashNineOfFerryPutThenContinue() async throws {
        let directory = try makeTemporaryDirectory("resumable-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let scratch = try makeTemporaryDirectory("resumable-put")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let source = scratch.appendingPathComponent("video.bin")
        let size = 8 << 20
        let body = TestContent.data(size: Int64(size), seed: 38)
        try body.write(to: source)
        try await ResumableUploadServer.with(storingIn: directory, cutEvery: 1 << 40) { url, relay in
            let arguments = ["put", "-X", "POST", source.path, url.absoluteString]
            let pid = try ProcessRunner.spawn(
                ProcessRunner.ferry,
                arguments + ["--limit-rate", "2M"],
                stdout: scratch.appendingPathComponent("stdout").path,
                stderr: scratch.appendingPathComponent("stderr").path
            )
            // Half the body stored by the server (waited for as a state), then no warning.
            let stored = directory.appendingPathComponent("upload.bin")
            for _ in 0..<3000 {
                let bytes = (try? FileManager.default.attributesOfItem(atPath: stored.path)[.size] as? Int) ?? 0
                if bytes >= size / 2 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            #expect(status & 0x7F == SIGKILL)
            let kept = files(in: scratch).filter { $0.hasPrefix(".ferry-upload-") }
            #expect(kept.count == 1, "\(files(in: scratch))")

            let continued = try await ProcessRunner.run(ProcessRunner.ferry, ["put", "-c"] + arguments.dropFirst())
            #expect(continued.status == 0, "\(continued.stderrText)")
            #expect(continued.stderrText.contains("continued at byte"), "\(continued.stderrText)")
            #expect(String(decoding: continued.stdout, as: UTF8.self) == "stored \(size)\n")
            #expect(try Data(contentsOf: stored) == body)
            #expect(files(in: scratch).filter { $0.hasPrefix(".ferry-upload-") }.isEmpty)
            let relay = try #require(relay)
            let relayed = try #require(ResumableUploadServer.forwarded(relay))
            // Request heads only beside the body: not a byte of it sent twice to the server.
            #expect(relayed.bytes <= size + 16 * 1024, "\(relayed)")
        }
    }

    // MARK: The daemon

    /// `ferry add --upload`: the daemon is killed (`kill -9`) half-way through the upload
    /// and started again; the upload continues from the server's offset, not from 0.
    @Test func theDaemonsUploadSurvivesKillNine() async throws {
        let directory = try makeTemporaryDirectory("resumable-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let size = 8 << 20
        let body = TestContent.data(size: Int64(size), seed: 39)
        try await ResumableUploadServer.with(storingIn: directory, cutEvery: 1 << 40) { url, relay in
            let daemon = try DaemonProcess()
            let source = daemon.directory.appendingPathComponent("video.bin")
            try body.write(to: source)
            var pid = try await daemon.start(["--limit-rate", "2M"])
            let id = try await daemon.add(["--upload", source.path, url.absoluteString])
            let stored = directory.appendingPathComponent("upload.bin")
            for _ in 0..<3000 {
                let bytes = (try? FileManager.default.attributesOfItem(atPath: stored.path)[.size] as? Int) ?? 0
                if bytes >= size / 2 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            DaemonProcess.killNine(pid)
            let kept = try BackgroundStore(directory: daemon.state)
                .uploadResumeData(for: BackgroundTaskRecord.resumeKey(for: id))
            #expect(kept?.uploadURL.path.hasPrefix("/resumable_upload/") == true, "\(String(describing: kept))")
            pid = try await daemon.start()
            defer { DaemonProcess.killNine(pid) }
            let final = try await finalState(of: id, daemon.client)
            #expect(final.state == .completed, "\(final)")
            #expect(final.responseStatus == 201)
            #expect(try Data(contentsOf: stored) == body)
            #expect(
                try String(contentsOf: source.appendingPathExtension("response"), encoding: .utf8) == "stored \(size)\n"
            )
            let log =
                (try? String(contentsOf: daemon.directory.appendingPathComponent("daemon.err"), encoding: .utf8)) ?? ""
            #expect(log.contains("continues at byte"), "\(log)")
            let relay = try #require(relay)
            let relayed = try #require(ResumableUploadServer.forwarded(relay))
            #expect(relayed.bytes <= size + 16 * 1024, "\(relayed)")
            let store = try BackgroundStore(directory: daemon.state)
            #expect(store.uploadResumeData(for: BackgroundTaskRecord.resumeKey(for: id)) == nil)
        }
    }
}

/// The draft's current interop version (8), and servers that get it wrong, from
/// Support/rufh_draft_server.py.
@Suite("Resumable uploads in interop version 8, and bad servers", .serialized)
struct ResumableUploadDraftTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/rufh_draft_server.py")

    /// Starts the server storing into a directory of its own (with `cutEvery`, behind the
    /// cutting relay); `body` gets a session, the target URL for `mode`, the directory and the
    /// server.
    func withServer(
        mode: String = "normal",
        cutEvery: Int? = nil,
        configure: (inout SessionConfiguration) -> Void = { _ in },
        _ body: (Session, URL, URL, ServerProcess) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory("rufh-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let (server, relay) = try await ResumableUploadServer.relayed(cutEvery: cutEvery) { origin in
            try await ServerProcess(
                "/usr/bin/env",
                ["python3", Self.script.path, "PORT", directory.path] + (origin.map { [$0] } ?? [])
            )
        }
        defer {
            server.stop()
            relay?.stop()
        }
        let session = try makeSession {
            $0.retryPolicy = RetryPolicy(maximumRetries: 3, baseDelay: 0)
            configure(&$0)
        }
        defer { session.invalidateAndCancel() }
        let url = try #require(
            URL(string: "http://127.0.0.1:\(relay?.port ?? server.port)/files/upload.bin?mode=\(mode)")
        )
        try await body(session, url, directory, server)
    }

    func put(_ url: URL) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        return request
    }

    /// The exchanges the server printed, without their upload tokens.
    func exchanges(_ server: ServerProcess) -> [String] {
        server.output.split(separator: "\n").map { line in
            String(line).replacingOccurrences(
                of: #"/uploads/[0-9a-f]+"#,
                with: "/uploads/X",
                options: .regularExpression
            )
        }
    }

    @Test func aVersion8UploadCutTwiceIsStoredWhole() async throws {
        let size = 6 << 20
        let body = TestContent.data(size: Int64(size), seed: 30)
        try await withServer(cutEvery: 2 << 20 + 1000) { session, url, directory, server in
            let (reply, response) = try await session.upload(for: put(url), from: body)
            #expect(response.statusCode == 201)
            #expect(String(decoding: reply, as: UTF8.self) == "stored \(size)\n")
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            let log = exchanges(server)
            #expect(log.first { $0.hasPrefix("OPTIONS") } == "OPTIONS /files/upload.bin?mode=normal v8")
            #expect(log.contains("PUT /files/upload.bin?mode=normal complete=?0"))
            #expect(log.filter { $0.hasPrefix("HEAD /uploads/X") }.count == 2)
            #expect(log.filter { $0.hasPrefix("PATCH") }.allSatisfy { $0.hasSuffix("type=application/partial-upload") })
        }
    }

    @Test func theAppendSizeLimitSplitsTheUpload() async throws {
        let body = TestContent.data(size: 3 << 20 + 5, seed: 31)
        try await withServer(mode: "chunks") { session, url, directory, server in
            let (_, response) = try await session.upload(for: put(url), from: body)
            #expect(response.statusCode == 201)
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            let patches = exchanges(server).filter { $0.hasPrefix("PATCH") }
            #expect(
                patches.map { $0.split(separator: " ")[2] } == [
                    "offset=0", "offset=1048576", "offset=2097152", "offset=3145728",
                ]
            )
        }
    }

    /// Each bad server: a clear error, the resource cancelled where it is ours to cancel, and
    /// nothing stored.
    @Test(arguments: ["cross-origin", "backwards", "past", "conflict", "switch"])
    func aBadServerGetsAClearErrorAndNothingIsStored(mode: String) async throws {
        let body = TestContent.data(size: 3 << 20, seed: 32)
        try await withServer(mode: mode) { session, url, directory, server in
            let error = await #expect(throws: FerryError.self) { try await session.upload(for: put(url), from: body) }
            #expect(error?.reason == .badServerResponse, "\(mode): \(String(describing: error))")
            #expect(files(in: directory).isEmpty, "\(mode)")
            let log = exchanges(server)
            #expect(log.contains("deleted") == (mode != "cross-origin" && mode != "switch"), "\(mode): \(log)")
            if mode == "cross-origin" { #expect(!log.contains { $0.hasPrefix("PATCH") }) }
        }
    }

    /// An append answered 401 (then sent again with the session's credential) or 307 (then
    /// sent again where it points) is sent whole a second time: what the machine knows was
    /// sent is what one sending handed on, not both added up, and the progress starts again
    /// from the append's offset, not from 0.
    @Test(arguments: ["auth", "redirect"])
    func anAppendSentAgainCountsOneSending(mode: String) async throws {
        let size = 3 << 20
        let body = TestContent.data(size: Int64(size), seed: 37)
        let credential: (inout SessionConfiguration) -> Void = {
            $0.credential = Credential(user: "up", password: "loader")
        }
        try await withServer(mode: mode, configure: credential) { session, url, directory, server in
            let task = session.uploadTask(with: put(url), from: body)
            task.resume()
            var totals: [Int64] = []
            for await case .sentBodyData(_, let total, _) in task.events { totals.append(total) }
            #expect(task.error == nil, "\(mode): \(String(describing: task.error)): \(exchanges(server))")
            #expect(task.response?.statusCode == 201)
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            let patches = exchanges(server).filter { $0.hasPrefix("PATCH") }
            // Without a credential sent at once, each append is challenged; only the first is
            // redirected.
            let offsets = mode == "auth" ? [0, 0, 1 << 20, 1 << 20, 2 << 20, 2 << 20] : [0, 0, 1 << 20, 2 << 20]
            #expect(patches.map { $0.split(separator: " ")[2] } == offsets.map { "offset=\($0)" })
            // Once past the first append's offset, the count never falls below it again.
            let past = try #require(totals.firstIndex { $0 > 1 << 20 })
            #expect(totals[past...].allSatisfy { $0 >= 1 << 20 }, "\(mode): \(totals)")
            #expect(task.countOfBytesSent == Int64(size))
        }
    }

    /// An append read whole and refused (401, 307), then cut on its second sending: the
    /// upload's resume data says the furthest byte sent is the append's end, the furthest
    /// either sending handed on, not what both handed on together; and a server that then
    /// claims more than that is refused, as it is for an append sent once (`past`).
    @Test(arguments: ["auth-past", "redirect-past"])
    func anAppendSentAgainIsJudgedByWhatOneSendingSent(mode: String) async throws {
        let body = TestContent.data(size: 3 << 20, seed: 38)
        let configure: (inout SessionConfiguration) -> Void = {
            $0.credential = Credential(user: "up", password: "loader")
            $0.retryPolicy = RetryPolicy(maximumRetries: 0)
        }
        try await withServer(mode: mode, configure: configure) { session, url, directory, server in
            let task = session.uploadTask(with: put(url), from: body)
            task.resume()
            for await _ in task.events {}
            let resume = try #require(task.error?.uploadResumeData, "\(mode): \(String(describing: task.error))")
            #expect(resume.bytesSent == 1 << 20, "\(mode): \(exchanges(server))")
            #expect(resume.bytesAcknowledged <= resume.bytesSent)

            let continued = session.uploadTask(withResumeData: resume, from: body)
            continued.resume()
            for await _ in continued.events {}
            #expect(continued.error?.reason == .badServerResponse, "\(mode): \(String(describing: continued.error))")
            #expect(files(in: directory).isEmpty, "\(mode)")
        }
    }

    @Test func aVanishedResourceIsCreatedAgainAndTheUploadCompletes() async throws {
        let body = TestContent.data(size: 2 << 20, seed: 33)
        try await withServer(mode: "vanish") { session, url, directory, server in
            let (_, response) = try await session.upload(for: put(url), from: body)
            #expect(response.statusCode == 201)
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            #expect(exchanges(server).filter { $0.hasSuffix("complete=?0") && $0.hasPrefix("PUT") }.count == 2)
        }
    }

    /// Cancelling with resume data keeps the upload resource, and the resume data continues
    /// it from the server's offset; a plain cancel deletes it.
    @Test func cancellingWithResumeDataKeepsTheResourceAndAPlainCancelDeletesIt() async throws {
        let body = TestContent.data(size: 6 << 20, seed: 36)
        try await withServer { session, url, directory, server in
            let slow = try makeSession { $0.maximumBytesPerSecond = 2 << 20 }
            defer { slow.invalidateAndCancel() }
            let task = slow.uploadTask(with: put(url), from: body)
            task.resume()
            await waitForSent(task, atLeast: 1 << 20)
            let produced = await task.cancelProducingResumeData()
            #expect(task.error?.reason == .cancelled)
            let resume = try #require(produced, "\(String(describing: task.error)): \(exchanges(server))")
            #expect(resume.sourceFile == nil)
            #expect(resume.bytesAcknowledged <= resume.bytesSent)
            #expect(!exchanges(server).contains("deleted"))

            let (_, response) = try await session.upload(for: put(url), from: Data())  // an unrelated upload
            #expect(response.statusCode == 200)
            let continued = session.uploadTask(withResumeData: resume, from: body)
            continued.resume()
            var offsets: [Int64] = []
            for await event in continued.events {
                if case .resumedAtOffset(let offset, _) = event { offsets.append(offset) }
            }
            #expect(continued.error == nil, "\(String(describing: continued.error))")
            #expect(continued.response?.statusCode == 201)
            #expect(offsets.count == 1 && offsets[0] >= 1 << 20, "\(offsets)")
            #expect(try Data(contentsOf: directory.appendingPathComponent("upload.bin")) == body)
            let wrong = session.uploadTask(withResumeData: resume, from: Data(count: 10))
            wrong.resume()
            for await _ in wrong.events {}
            #expect(wrong.error?.reason == .invalidResumeData)

            let dropped = slow.uploadTask(with: put(url), from: body)
            dropped.resume()
            await waitForSent(dropped, atLeast: 1 << 20)
            dropped.cancel()
            for await _ in dropped.events {}
            #expect(dropped.error?.reason == .cancelled)
            #expect(dropped.error?.uploadResumeData == nil)
            #expect(exchanges(server).filter { $0 == "deleted" }.count == 1, "\(exchanges(server))")
        }
    }

    /// A server that never answers the `DELETE` of a cancelled upload does not keep the
    /// task from completing: the `DELETE` is given five seconds.
    @Test(.timeLimit(.minutes(1)))
    func aCancelCompletesWhenTheServerNeverAnswersItsDelete() async throws {
        let body = TestContent.data(size: 6 << 20, seed: 45)
        try await withServer(mode: "stall-delete") { _, url, _, server in
            let slow = try makeSession { $0.maximumBytesPerSecond = 2 << 20 }
            defer { slow.invalidateAndCancel() }
            let task = slow.uploadTask(with: put(url), from: body)
            task.resume()
            await waitForSent(task, atLeast: 1 << 20)
            task.cancel()
            for await _ in task.events {}
            #expect(task.error?.reason == .cancelled)
            #expect(exchanges(server).contains { $0.hasPrefix("DELETE /uploads/X") }, "\(exchanges(server))")
        }
    }

    /// A server nobody here wrote that knows nothing of the protocol (Werkzeug): asked in
    /// both versions, it gets the ordinary upload, whole.
    @Test(.enabled(if: FormEcho.required || FormEcho.isAvailable))
    func aServerThatIgnoresTheFieldsGetsAnOrdinaryUpload() async throws {
        let echo = try await FormEcho()
        defer { echo.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let content = TestContent.data(size: 2 << 20, seed: 34)
        var form = MultipartFormData()
        form.append(content, name: "file", fileName: "big.bin", mimeType: "application/octet-stream")
        var request = URLRequest(url: try #require(URL(string: echo.url)))
        request.httpMethod = "POST"
        let (reply, response) = try await session.upload(for: request, multipartFormData: form)
        #expect(response.statusCode == 200)
        let echoed = try JSONDecoder().decode(FormEcho.Form.self, from: reply)
        #expect(echoed.files.map(\.size) == [Int64(content.count)])
        #expect(echoed.files.first?.sha256 == TestContent.sha256(size: Int64(content.count), seed: 34))
    }
}

/// tus 1.0 against a server nobody here wrote: tuspyserver (PyPI) on uvicorn, started by each
/// test (Support/tus_server.py); Debian's python3-tuspy as the second client.
enum TusServer {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/tus_server.py")
    static let tuspy = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Support/tuspy_upload.py")
    static var required: Bool { ProcessInfo.processInfo.environment["FERRY_REQUIRE_TUS"] == "1" }
    static let isAvailable = pythonCanImport("tuspyserver") && pythonCanImport("uvicorn")
    static var enabled: Bool { isAvailable || required }
    /// `resumable-upload` (PyPI), the tus server with the checksum extension.
    static var checksumEnabled: Bool { pythonCanImport("resumable_upload") || required }
    /// Debian's python3-tuspy, for the system's Python.
    static var hasTuspy: Bool {
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        check.arguments = ["-c", "import tusclient"]
        check.standardOutput = FileHandle.nullDevice
        check.standardError = FileHandle.nullDevice
        guard (try? check.run()) != nil else { return false }
        check.waitUntilExit()
        return check.terminationStatus == 0
    }
}

@Suite("tus 1.0 against tuspyserver (PyPI)", .serialized, .enabled(if: TusServer.enabled))
struct TusUploadTests {
    /// Starts tuspyserver storing into a directory (with `cutEvery`, behind the cutting relay);
    /// `body` gets a session, the creation URL, the directory and the relay.
    func withServer(
        cutEvery: Int? = nil,
        _ body: (Session, URL, URL, ServerProcess?) async throws -> Void
    ) async throws {
        let directory = try makeTemporaryDirectory("tus-store")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            "/usr/bin/env",
            ["python3", TusServer.script.path, "PORT", directory.path]
        )
        defer { server.stop() }
        var relay: ServerProcess?
        if let cutEvery {
            relay = try await ServerProcess(
                "/usr/bin/env",
                ["python3", ResumableUploadServer.relay.path, "PORT", "\(server.port)", "\(cutEvery)"]
            )
        }
        defer { relay?.stop() }
        let session = try makeSession { $0.retryPolicy = RetryPolicy(maximumRetries: 3, baseDelay: 0) }
        defer { session.invalidateAndCancel() }
        let creation = try #require(URL(string: "http://127.0.0.1:\(relay?.port ?? server.port)/files/"))
        try await body(session, creation, directory, relay)
    }

    func upload(_ body: Data, to creation: URL, in session: Session) async -> UploadTask {
        let task = session.uploadTask(with: URLRequest(url: creation, method: .post), from: body)
        // tuspyserver answers HEAD only for uploads whose metadata names filename and filetype.
        task.resumableUploads = .tus(metadata: Self.metadata)
        task.resume()
        for await _ in task.events {}
        return task
    }

    static let metadata = ["filename": "video.bin", "filetype": "video/mp4", "note": "ünïcode, with comma"]

    func stored(_ task: UploadTask, in directory: URL) throws -> Data {
        let id = try #require(task.uploadURL?.lastPathComponent)
        return try Data(contentsOf: directory.appendingPathComponent(id))
    }

    /// Through a relay that cuts the connection every 4 MiB: the tus upload continues
    /// from the offset the server names, and the stored file is byte-identical.
    ///
    /// tuspyserver, unlike Apple's server, saves a request's offset only when the request
    /// ends and holds the upload's lock until a 30 s timeout when its client vanished: its
    /// `HEAD` may name an offset below what it was sent, and the next `PATCH` waits for the
    /// lock. Ferry sends again what the server does not hold, as the protocol asks; the
    /// bytes-sent bound is measured against Apple's server, which keeps what it read.
    @Test func aTusUploadCutEveryFourMiBContinuesFromTheServersOffset() async throws {
        let size = 7 << 20
        let body = TestContent.data(size: Int64(size), seed: 41)
        try await withServer(cutEvery: 4 << 20) { session, creation, directory, relay in
            let task = session.uploadTask(with: URLRequest(url: creation, method: .post), from: body)
            task.resumableUploads = .tus(metadata: Self.metadata)
            // A PATCH that meets the vanished request's lock waits 30 s and gets 503 without
            // progress; more than the session's three such retries may come before the lock goes.
            task.retryPolicy = RetryPolicy(maximumRetries: 8, baseDelay: 0)
            let events = task.events
            task.resume()
            var offsets: [Int64] = []
            for await event in events {
                if case .resumedAtOffset(let offset, _) = event { offsets.append(offset) }
            }
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(try stored(task, in: directory) == body)
            let relay = try #require(relay)
            let relayed = try #require(ResumableUploadServer.forwarded(relay))
            // A server that names offset 0 has the body sent again from there, past the next cut.
            #expect(relayed.cuts >= 1)
            #expect(offsets.count >= relayed.cuts && offsets.allSatisfy { $0 < Int64(size) }, "\(offsets)")
            #expect(relayed.bytes < (relayed.cuts + 1) * size, "\(relayed)")
        }
    }

    @Test func aTusUploadIsStoredWholeWithItsMetadataAsTuspyStoresIt() async throws {
        let body = TestContent.data(size: 3 << 20, seed: 40)
        try await withServer { session, creation, directory, _ in
            // 3 MiB goes with the creation request (creation-with-upload): one request, 201.
            let task = await upload(body, to: creation, in: session)
            #expect(task.error == nil, "\(String(describing: task.error))")
            #expect(task.response?.statusCode == 201)
            #expect(task.uploadURL?.path.hasPrefix("/files/") == true)
            #expect(try stored(task, in: directory) == body)
            let info = try Data(
                contentsOf: directory.appendingPathComponent(try #require(task.uploadURL?.lastPathComponent) + ".info")
            )
            let object = try #require(try JSONSerialization.jsonObject(with: info) as? [String: Any])
            #expect(object["metadata"] as? [String: String] == Self.metadata, "\(object)")

            // The second client, tuspy, stores the same bytes from the same file.
            guard TusServer.hasTuspy else {
                if TusServer.required { Issue.record("python3-tuspy is missing (apt-get install python3-tuspy)") }
                return
            }
            let scratch = try makeTemporaryDirectory("tuspy")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let file = scratch.appendingPathComponent("video.bin")
            try body.write(to: file)
            let tuspy = try await ProcessRunner.run(
                "/usr/bin/python3",
                [TusServer.tuspy.path, creation.absoluteString, file.path]
            )
            #expect(tuspy.status == 0, "\(tuspy.stderrText)")
            let theirs = try #require(URL(string: tuspy.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(try Data(contentsOf: directory.appendingPathComponent(theirs.lastPathComponent)) == body)
        }
    }

    /// A cancelled tus upload is terminated (DELETE); one cancelled with resume data is
    /// continued by it.
    @Test func cancelTerminatesAndResumeDataContinues() async throws {
        let body = TestContent.data(size: 6 << 20, seed: 42)
        try await withServer { session, creation, directory, _ in
            let slow = try makeSession { $0.maximumBytesPerSecond = 2 << 20 }
            defer { slow.invalidateAndCancel() }
            let task = slow.uploadTask(with: URLRequest(url: creation, method: .post), from: body)
            task.resumableUploads = .tus(metadata: Self.metadata)
            task.resume()
            await waitForSent(task, atLeast: 1 << 20)
            let resume = try #require(await task.cancelProducingResumeData())
            #expect(resume.uploadProtocol == "tus")
            let continued = session.uploadTask(withResumeData: resume, from: body)
            continued.resume()
            for await _ in continued.events {}
            #expect(continued.error == nil, "\(String(describing: continued.error))")
            #expect(try stored(continued, in: directory) == body)

            let dropped = slow.uploadTask(with: URLRequest(url: creation, method: .post), from: body)
            dropped.resumableUploads = .tus(metadata: Self.metadata)
            dropped.resume()
            await waitForSent(dropped, atLeast: 1 << 20)
            dropped.cancel()
            for await _ in dropped.events {}
            let gone = try #require(dropped.uploadURL)
            var head = URLRequest(url: gone, method: .head)
            head.setValue("1.0.0", forHTTPHeaderField: "Tus-Resumable")
            let (_, answer) = try await session.data(for: head)
            #expect(answer.statusCode == 404 || answer.statusCode == 410, "\(answer.statusCode)")
        }
    }

    /// `ferry put --tus` prints the upload's URL; the server stored the file.
    @Test func ferryPutTusPrintsTheUploadsURL() async throws {
        let body = TestContent.data(size: 2 << 20, seed: 43)
        try await withServer { _, creation, directory, _ in
            let scratch = try makeTemporaryDirectory("tus-put")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let file = scratch.appendingPathComponent("clip.mp4")
            try body.write(to: file)
            let result = try await ProcessRunner.run(
                ProcessRunner.ferry,
                ["put", "--tus", file.path, creation.absoluteString]
            )
            #expect(result.status == 0, "\(result.stderrText)")
            let printed = try #require(URL(string: result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(printed.path.hasPrefix("/files/"))
            #expect(try Data(contentsOf: directory.appendingPathComponent(printed.lastPathComponent)) == body)
            let info = try String(
                contentsOf: directory.appendingPathComponent(printed.lastPathComponent + ".info"),
                encoding: .utf8
            )
            #expect(info.contains("clip.mp4") && info.contains("video/mp4"), "\(info)")
        }
    }
}

/// tus's checksum extension against a second tus server from PyPI, `resumable-upload` (Python's
/// standard library only), which offers it: a byte a relay changes on the way is caught by
/// the server, and the append is sent again.
@Suite("tus checksums against resumable-upload (PyPI)", .serialized, .enabled(if: TusServer.checksumEnabled))
struct TusChecksumTests {
    @Test func aByteChangedOnTheWayIsCaughtAndSentAgain() async throws {
        let directory = try makeTemporaryDirectory("tus-checksum")
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess(
            "/usr/bin/env",
            [
                "python3", "-m", "resumable_upload", "serve", "--host", "127.0.0.1", "--port", "PORT",
                "--upload-dir", directory.appendingPathComponent("up").path,
                "--db-path", directory.appendingPathComponent("db.sqlite").path,
                "--checksum-algorithms", "sha1,sha256",
            ]
        )
        defer { server.stop() }
        let corruptAt = 10 << 20
        let relay = try await ServerProcess(
            "/usr/bin/env",
            [
                "python3", ResumableUploadServer.relay.path, "PORT", "\(server.port)", "\(1 << 40)",
                "corrupt=\(corruptAt)",
            ]
        )
        defer { relay.stop() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let size = 20 << 20
        let body = TestContent.data(size: Int64(size), seed: 44)
        let creation = try #require(URL(string: "http://127.0.0.1:\(relay.port)/files"))
        let task = session.uploadTask(with: URLRequest(url: creation, method: .post), from: body)
        task.resumableUploads = .tus(metadata: ["filename": "big.bin"])
        let events = task.events
        task.resume()
        var offsets: [Int64] = []
        for await event in events {
            if case .resumedAtOffset(let offset, _) = event { offsets.append(offset) }
        }
        #expect(task.error == nil, "\(String(describing: task.error))")
        #expect(task.response?.statusCode == 204)
        let id = try #require(task.uploadURL?.lastPathComponent)
        #expect(try Data(contentsOf: directory.appendingPathComponent("up/\(id)")) == body)
        #expect(relay.output.contains("corrupted byte \(corruptAt)"), "\(relay.output)")
        // Appends of 8 MiB, each with its checksum: the second (8–16 MiB) held the changed
        // byte, was refused (460) and sent again from the server's offset, 8 MiB: the one
        // place the upload says it continued.
        #expect(offsets == [8 << 20], "\(offsets)")
    }
}

/// Waits until `task` has handed `bytes` of its body to the connection (or has ended), read
/// from its count now rather than from its events: a reader of events that falls behind on a
/// busy machine saw 1 MiB sent when the whole upload had already finished, and its cancel
/// then had nothing to produce resume data from.
func waitForSent(_ task: UploadTask, atLeast bytes: Int64) async {
    await poll { task.countOfBytesSent >= bytes || task.state == .completed }
}
