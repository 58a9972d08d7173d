import Crypto
import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Runs `body` with a fresh FerryTestServer on a free loopback port, shut down afterwards.
func withServer<Result>(_ body: (FerryTestServer) async throws -> Result) async throws -> Result {
    let server = try await FerryTestServer.start()
    do {
        let result = try await body(server)
        await server.shutdown()
        return result
    } catch {
        await server.shutdown()
        throw error
    }
}

extension TestPKI.Identity {
    /// Writes the certificate and its key as PEM files in `directory`, `PREFIXcert.pem` and
    /// `PREFIXkey.pem`, for a server nobody here wrote (nginx, Python) to read.
    func writePEMFiles(in directory: URL, prefix: String = "") throws -> (certificate: URL, key: URL) {
        let certificate = directory.appendingPathComponent("\(prefix)cert.pem")
        let key = directory.appendingPathComponent("\(prefix)key.pem")
        try certificatePEM.write(to: certificate, atomically: true, encoding: .utf8)
        try privateKeyPEM.write(to: key, atomically: true, encoding: .utf8)
        return (certificate, key)
    }
}

/// A new, empty directory in this test process's scratch folder (``TestScratch``).
func makeTemporaryDirectory(_ label: String = "test") throws -> URL {
    let url = try TestScratch.root()
        .appendingPathComponent("ferry-\(label)-\(UUID().uuidString.prefix(8))", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A session whose downloads directory is private to the test.
func makeSession(
    delegate: (any SessionDelegate)? = nil,
    _ configure: (inout SessionConfiguration) -> Void = { _ in }
) throws -> Session {
    var configuration = SessionConfiguration.default
    configuration.downloadsDirectory = try makeTemporaryDirectory("partials")
    configure(&configuration)
    return try Session(configuration: configuration, delegate: delegate)
}

/// Names of the files in `directory` (empty when it does not exist).
func files(in directory: URL) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
}

/// The SHA-256 of a (large) file, computed on a thread of its own: hashing a gibibyte on
/// the cooperative pool (two threads here) would starve the in-process test servers of the
/// tests running beside it.
func sha256(of file: URL) async throws -> String {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<String, any Error>) in
        Thread { continuation.resume(with: Result { try sha256Blocking(of: file) }) }.start()
    }
}

func sha256Blocking(of file: URL) throws -> String {
    let handle = try FileHandle(forReadingFrom: file)
    defer { try? handle.close() }
    var hasher = SHA256()
    while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { hasher.update(data: chunk) }
    return hasher.finalize().map { String(format: "%02x", $0) }.joined()
}

/// Resumes `task` and returns every event it publishes, through its completion.
func resumeCollectingEvents(_ task: SessionTask) async -> [TaskEvent] {
    let events = task.events
    task.resume()
    return await collectEvents(events)
}

/// Collects a task's events until its completion.
func collectEvents(_ stream: AsyncStream<TaskEvent>) async -> [TaskEvent] {
    var events: [TaskEvent] = []
    for await event in stream { events.append(event) }
    return events
}

extension TaskEvent {
    var name: String {
        switch self {
        case .resumed: "resumed"
        case .suspended: "suspended"
        case .willRedirect: "willRedirect"
        case .informationalResponse: "informationalResponse"
        case .response: "response"
        case .trailers: "trailers"
        case .data: "data"
        case .sentBodyData: "sentBodyData"
        case .wroteData: "wroteData"
        case .becameDownload: "becameDownload"
        case .becameStreamTask: "becameStreamTask"
        case .segments: "segments"
        case .finishedDownloading: "finishedDownloading"
        case .resumedAtOffset: "resumedAtOffset"
        case .willRetry: "willRetry"
        case .movedDownload: "movedDownload"
        case .failedToMoveDownload: "failedToMoveDownload"
        case .finishedCollectingMetrics: "finishedCollectingMetrics"
        case .completed: "completed"
        }
    }

    var completionError: FerryError?? {
        if case .completed(let error) = self { return .some(error) }
        return .none
    }
}

/// FerryTestServer's `/sink` reply: what it read, and for a multipart body each part as
/// its parser (multipart-kit, or the fast scanner) read it.
struct SinkReport: Decodable {
    struct Part: Decodable {
        var headers: [[String]]
        var bytes: Int64
        var sha256: String
        var text: String

        func header(_ name: String) -> String? {
            headers.first { $0[0].lowercased() == name.lowercased() }?[1]
        }
    }

    var bytes: Int64
    var sha256: String
    var method: String
    var chunked: Bool
    var contentLength: Int64
    var parts: [Part]?
    var multipartError: String?
}

/// The resume store's entry in `directory` (the CLI keeps it beside the output).
func storedResumeData(in directory: URL) throws -> ResumeData? {
    guard let name = files(in: directory).first(where: { $0.hasPrefix(".ferry-resume-") }) else { return nil }
    let object = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent(name)))
    let inner = try #require((object as? [String: Any])?["resumeData"])
    return try ResumeData(decoding: JSONSerialization.data(withJSONObject: inner))
}

/// Writes `mebibytes` MiB of random bytes to `url` (with dd, off the cooperative pool).
func makeRandomFile(_ url: URL, mebibytes: Int) async throws {
    let made = try await ProcessRunner.run(
        "/bin/dd",
        ["if=/dev/urandom", "of=\(url.path)", "bs=1M", "count=\(mebibytes)", "status=none"]
    )
    try #require(made.status == 0, "dd failed: \(made.stderrText)")
}

/// Checks progress events: each total is the previous plus its increment, every event names
/// `expected`, and the last ends exactly at `expected`.
func expectExactProgress(
    _ steps: [(increment: Int64, total: Int64, expected: Int64?)],
    endsAt expected: Int64,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    var last: Int64 = 0
    for step in steps {
        #expect(step.total == last + step.increment, sourceLocation: sourceLocation)
        #expect(step.expected == expected, sourceLocation: sourceLocation)
        last = step.total
    }
    #expect(last == expected, sourceLocation: sourceLocation)
}
