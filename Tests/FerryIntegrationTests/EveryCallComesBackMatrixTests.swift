import Ferry
import FerryTestServer
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every public async call and every completion-handler form, against every failure a
/// server or a caller can cause: each comes back with a typed error within a bound, a
/// handler runs exactly once, no destination or partial file is left, and no descriptor to
/// a file of the test stays open.
@Suite("Every call comes back: calls × failures")
struct EveryCallComesBackMatrixTests {
    /// How the call is made.
    enum Call: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case data, upload, uploadFromFile, download, bytes
        case dataHandler, uploadHandler, uploadFromFileHandler, downloadHandler, downloadToTemporaryHandler
        /// A download task resumed, then awaited with `completed()`, as `ferry get`'s jobs do.
        case downloadAwaited
        case managerGet, managerPost

        var testDescription: String { rawValue }
        var hasHandler: Bool { ![.data, .upload, .uploadFromFile, .download, .bytes].contains(self) }
        /// Whether an error status fails the call (a data task's response is no error, as
        /// with URLSession; a download and the manager's validation refuse it).
        var refusesErrorStatus: Bool {
            [.download, .downloadHandler, .downloadToTemporaryHandler, .downloadAwaited, .managerGet, .managerPost]
                .contains(self)
        }
        var downloads: Bool {
            [.download, .downloadHandler, .downloadToTemporaryHandler, .downloadAwaited].contains(self)
        }
    }

    /// What goes wrong.
    enum Failure: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Nothing listens on the port.
        case refused
        /// The connection closes after 1,000 of 1,000,000 announced bytes.
        case resetMidBody
        /// The server announces 200,000 bytes, sends 100,000 and closes.
        case shortBody
        /// The server answers (413) before reading the body, and closes.
        case answersBeforeReadingTheBody
        /// The session was invalidated before the call.
        case invalidatedSession
        /// The task is cancelled before it is resumed (the Swift task, for async calls).
        case cancelledBeforeResume
        /// The task is cancelled while the server holds the body back.
        case cancelledWhileRunning

        var testDescription: String { rawValue }
    }

    static let bound: Double = 60

    @Test(arguments: Call.allCases, Failure.allCases)
    func comesBack(_ call: Call, _ failure: Failure) async throws {
        try await withServer { server in
            let directory = try makeTemporaryDirectory("matrix")
            let partials = directory.appendingPathComponent("partials", isDirectory: true)
            try FileManager.default.createDirectory(at: partials, withIntermediateDirectories: true)
            let session = try makeSession {
                $0.downloadsDirectory = partials
                $0.retryPolicy = .none
            }
            let body = directory.appendingPathComponent("body.bin")
            try Data(count: 300_000).write(to: body)
            let destination = directory.appendingPathComponent("out.bin")
            let url = try await target(for: failure, server: server)
            if failure == .invalidatedSession { session.invalidateAndCancel() }

            let outcome = await finishing(within: Self.bound) {
                await Self.perform(call, failure, url: url, session: session, body: body, destination: destination)
            }
            guard let outcome else {
                Issue.record("\(call) with \(failure) did not come back")
                session.invalidateAndCancel()
                return
            }
            if failure != .answersBeforeReadingTheBody || call.refusesErrorStatus {
                #expect(outcome.error != nil, "\(call) with \(failure) must fail")
            }
            if call.hasHandler { #expect(outcome.handlerCalls == 1, "the handler ran \(outcome.handlerCalls) times") }
            if let reason = expectedReason(failure) {
                #expect(
                    outcome.error?.reason == reason,
                    "\(call) with \(failure): \(String(describing: outcome.error))"
                )
            }
            #expect(!FileManager.default.fileExists(atPath: destination.path), "no destination after a failure")
            // Bytes a download received before its connection broke are kept, with the resume
            // data that continues them; nothing else is left behind.
            if call.downloads, [.resetMidBody, .shortBody].contains(failure), !files(in: partials).isEmpty {
                #expect(outcome.error?.resumeData != nil, "a kept partial file comes with its resume data")
            } else {
                #expect(files(in: partials).isEmpty, "no partial file left: \(files(in: partials))")
            }
            #expect(descriptorsOpen(under: directory).isEmpty, "\(descriptorsOpen(under: directory))")
            session.invalidateAndCancel()
        }
    }

    private func expectedReason(_ failure: Failure) -> FerryError.Reason? {
        switch failure {
        case .invalidatedSession: .sessionInvalidated
        case .cancelledBeforeResume, .cancelledWhileRunning: .cancelled
        case .refused: .network
        case .resetMidBody, .shortBody, .answersBeforeReadingTheBody: nil
        }
    }

    private func target(for failure: Failure, server: FerryTestServer) async throws -> URL {
        switch failure {
        case .refused: return URL(string: "http://127.0.0.1:\(try closedPort())/bytes/10")!
        case .resetMidBody: return server.url("/bytes/1000000?close-after=1000")
        case .shortBody: return server.url("/bytes/100000?lie-length=200000")
        case .answersBeforeReadingTheBody: return server.url("/early?status=413")
        case .invalidatedSession, .cancelledBeforeResume: return server.url("/bytes/1000")
        case .cancelledWhileRunning: return server.url("/bytes/1000000?stall-at=1000")
        }
    }

    /// What the call gave back.
    struct Outcome: Sendable {
        var error: FerryError?
        var handlerCalls = 0
    }

    /// Makes the call, and for `cancelledWhileRunning` cancels it once the server has the
    /// request; returns its error and how often its handler ran.
    private static func perform(
        _ call: Call,
        _ failure: Failure,
        url: URL,
        session: Session,
        body: URL,
        destination: URL
    ) async -> Outcome {
        var request = URLRequest(url: url)
        if [.upload, .uploadFromFile, .uploadHandler, .uploadFromFileHandler, .managerPost].contains(call) {
            request.httpMethod = "PUT"
        }
        if !call.hasHandler {
            let work = Task { () -> FerryError? in
                let error = await thrownError {
                    switch call {
                    case .data: _ = try await session.data(for: request)
                    case .upload: _ = try await session.upload(for: request, from: Data(count: 300_000))
                    case .uploadFromFile: _ = try await session.upload(for: request, fromFile: body)
                    case .download: _ = try await session.download(for: request, to: .file(destination))
                    case .bytes:
                        let (bytes, _) = try await session.bytes(for: request)
                        for try await _ in bytes {}
                    default: break
                    }
                }
                return error as? FerryError ?? error.map { FerryError(.network, "\($0)") }
            }
            switch failure {
            case .cancelledBeforeResume: work.cancel()
            case .cancelledWhileRunning: await cancelOnceRunning(session) { work.cancel() }
            default: break
            }
            return Outcome(error: await work.value)
        }
        let tally = CallTally()
        let error = MutexBox<FerryError?>(nil)
        let record: @Sendable (FerryError?) -> Void = { given in
            error.mutate { $0 = given }
            tally.record()
        }
        let task: SessionTask?
        switch call {
        case .dataHandler:
            task = session.dataTask(with: request) { _, _, given in record(given) }
        case .uploadHandler:
            task = session.uploadTask(with: request, from: Data(count: 300_000)) { _, _, given in record(given) }
        case .uploadFromFileHandler:
            task = session.uploadTask(with: request, fromFile: body) { _, _, given in record(given) }
        case .downloadHandler:
            task = session.downloadTask(with: request, to: .file(destination)) { _, _, given in record(given) }
        case .downloadToTemporaryHandler:
            task = session.downloadTask(with: request) { _, _, given in record(given) }
        case .downloadAwaited:
            task = session.downloadTask(with: request, to: .file(destination))
        case .managerGet, .managerPost:
            let manager = HTTPSessionManager(baseURL: nil, session: session)
            let path = url.absoluteString
            task =
                call == .managerGet
                ? manager.get(path, success: { _, _ in record(nil) }, failure: { _, given in record(given) })
                : manager.put(
                    path,
                    parameters: ["a": "b"],
                    success: { _, _ in record(nil) },
                    failure: { _, given in record(given) }
                )
        default:
            task = nil
        }
        switch failure {
        case .cancelledBeforeResume: task?.cancel()
        case .cancelledWhileRunning: await cancelOnceRunning(session) { task?.cancel() }
        default: break
        }
        task?.resume()  // the manager's tasks are running already; a second resume does nothing
        if call == .downloadAwaited, let task = task as? DownloadTask {
            await task.completed()
            return Outcome(error: task.error, handlerCalls: 1)
        }
        await tally.firstCall()
        return Outcome(error: error.value, handlerCalls: tally.count)
    }

    /// Runs `cancel` once the session's one task has its response (the server holds the
    /// rest of the body back), or once the task was seen and has left the session's list
    /// (it ended first); a minute at most.
    private static func cancelOnceRunning(_ session: Session, _ cancel: @escaping @Sendable () -> Void) async {
        Task {
            var seen = false
            for _ in 0..<12_000 {
                if let task = session.allTasks.first {
                    seen = true
                    if task.response != nil { break }
                } else if seen {
                    break
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
            cancel()
        }
    }
}

/// A loopback port nothing listens on: bound, then closed.
func closedPort() throws -> Int {
    try ClosedPorts.take()
}

/// Loopback ports on which connections are refused, for as long as the test process runs:
/// each is bound by a socket that never listens. (A port found free and closed again was
/// taken by another test's server now and then, which answered the "refused" request.)
enum ClosedPorts {
    private static let held = Mutex<[Int32]>([])

    static func take() throws -> Int {
        let (descriptor, port) = try boundLoopbackSocket()
        held.withLock { $0.append(descriptor) }
        return port
    }
}

/// The paths under `directory` that this process has a descriptor open to.
func descriptorsOpen(under directory: URL) -> [String] {
    let prefix = directory.resolvingSymlinksInPath().path
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.compactMap { entry in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)"))
            .flatMap { $0.hasPrefix(prefix) || $0.hasPrefix(directory.path) ? $0 : nil }
    }
}
