import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Every public call returns or throws in bounded time on the paths beside the main one,
/// and every completion handler runs exactly once. Each test is named after a defect that
/// once hung or lost a callback; the bound is a ceiling on liveness, far above what the
/// call takes when it works.
@Suite("Every call comes back")
struct EveryCallComesBackTests {
    /// Two minutes. A call that works takes milliseconds alone, but the full suite starts
    /// some 700 tests at once on two cores: with one of them kept busy (as the suite must
    /// also pass), an empty `206`'s download (0.07 s alone) took 44–57 s there, every step
    /// of it late (its `resumed` event reached the test 5 s after `resume()`, its first
    /// response 15–20 s), and a bound of 60 s failed once in an ordinary run.
    static let bound: Double = 120

    // MARK: Segmented downloads

    /// Resumed with one slot per host and four connections wanted, a split download used to
    /// give every connection a slot of its own while the transfer kept its slot idle: no
    /// connection ever got one.
    @Test func aResumedSegmentedDownloadWithOneSlotPerHostFinishes() async throws {
        try await withServer { server in
            let partials = try makeTemporaryDirectory("partials-shared")
            let size: Int64 = 16_000_000
            let url = server.url("/bytes/\(size)?seed=41&drip=65536&interval=5")
            let first = try makeSession {
                $0.downloadsDirectory = partials
                $0.maximumConnectionsPerDownload = 4
                $0.minimumSegmentSize = 1 << 20
            }
            let task = first.downloadTask(with: url)
            let events = task.events
            task.resume()
            for await event in events {
                if case .wroteData(_, let total, _) = event, total >= 2_000_000 { break }
            }
            let resumeData = try #require(await task.cancelProducingResumeData())
            #expect(resumeData.segments != nil, "the resume data records the segments")

            let limited = try makeSession {
                $0.downloadsDirectory = partials
                $0.maximumConnectionsPerDownload = 4
                $0.minimumSegmentSize = 1 << 20
                $0.httpMaximumConnectionsPerHost = 1
            }
            let output = try makeTemporaryDirectory("resumed-segments").appendingPathComponent("out.bin")
            let resumed = limited.downloadTask(withResumeData: resumeData, to: .file(output))
            let ended = await finishing(within: Self.bound) { await resumeCollectingEvents(resumed) }
            #expect(ended != nil, "the resumed download ended")
            #expect(resumed.error == nil, "\(String(describing: resumed.error))")
            if ended != nil {
                #expect(try Data(contentsOf: output) == TestContent.data(size: size, seed: 41))
            } else {
                resumed.cancel()
            }
        }
    }

    /// A server whose ranged answers are `206`s with a valid `Content-Range` and no body: a
    /// segment used to ask again at once, forever. Now the short body is an error, retried
    /// under the retry policy, and the task ends.
    @Test func anEmpty206EndsASegmentedDownloadInsteadOfLooping() async throws {
        try await withServer { server in
            let session = try makeSession {
                $0.maximumConnectionsPerDownload = 4
                $0.minimumSegmentSize = 1 << 20
            }
            let output = try makeTemporaryDirectory("empty-206").appendingPathComponent("out.bin")
            let task = session.downloadTask(
                with: server.url("/bytes/8000000?seed=5&empty206=1&drip=65536&interval=5"),
                to: .file(output)
            )
            task.retryPolicy = RetryPolicy(maximumRetries: 2, baseDelay: 0.01, maximumDelay: 0.05)
            let ended = await finishing(within: Self.bound) { await resumeCollectingEvents(task) }
            #expect(ended != nil, "the download ended")
            if ended == nil { task.cancel() }
            #expect(task.error?.reason == .badServerResponse, "\(String(describing: task.error))")
            let ranged = server.requests(to: "/bytes/8000000").filter { $0.headers["range"] != nil }
            #expect(ranged.count <= 4 * 3, "at most one request per connection per try: \(ranged.count)")
            #expect(!FileManager.default.fileExists(atPath: output.path))
        }
    }

    // MARK: Stream tasks that never connected

    /// A stream task cancelled before `resume()`, made with a port that is no TCP port, or
    /// made by an invalidated session: its reads, writes and TLS calls used to wait for a
    /// connection that would never come.
    @Test func streamTaskCallsReturnWhenTheTaskNeverConnected() async throws {
        let session = try makeSession()
        let cancelled = session.streamTask(withHostName: "127.0.0.1", port: 9)
        cancelled.cancel()
        let badPort = session.streamTask(withHostName: "127.0.0.1", port: 70_000)
        let invalidated = try makeSession()
        invalidated.invalidateAndCancel()
        let orphan = invalidated.streamTask(withHostName: "127.0.0.1", port: 9)
        orphan.resume()
        for task in [cancelled, badPort, orphan] {
            let read = await finishing(within: Self.bound) {
                await thrownError { _ = try await task.read(minLength: 1, maxLength: 10, timeout: 0) } != nil
            }
            #expect(read == true, "\(task): the read came back with an error")
            let write = await finishing(within: Self.bound) {
                await thrownError { try await task.write(Data("x".utf8), timeout: 0) } != nil
            }
            #expect(write == true, "\(task): the write came back with an error")
            let tls = await finishing(within: Self.bound) {
                await thrownError { try await task.startSecureConnection() } != nil
            }
            #expect(tls == true, "\(task): startSecureConnection came back with an error")
            let closed = await finishing(within: Self.bound) { () -> Bool in
                await task.closeWrite()
                await task.closeRead()
                return true
            }
            #expect(closed == true, "\(task): closing came back")
        }
    }

    /// Tasks cancelled while they connect to a host that never answers (its SYNs dropped),
    /// in a session that would wait an hour: a data task over HTTP/1.1 (AsyncHTTPClient's
    /// pool), one over HTTPS (Ferry's HTTP/2 pool) and a stream task each come back cancelled,
    /// and the stream task's read with them. Each is cancelled once its SYN is out (a state
    /// read from `/proc/net/tcp`, not a time).
    ///
    /// Before, the HTTPS task and the stream task waited for the connect limit.
    @Test func tasksCancelledWhileTheyConnectComeBack() async throws {
        let listener = try UnreachableListener()
        defer { listener.close() }
        let session = try makeSession { $0.timeoutIntervalForRequest = 3600 }
        defer { session.invalidateAndCancel() }
        let stream = session.streamTask(withHostName: "127.0.0.1", port: listener.port)
        let tasks: [SessionTask] = [
            session.dataTask(with: URL(string: "http://127.0.0.1:\(listener.port)/")!),
            session.dataTask(with: URL(string: "https://127.0.0.1:\(listener.port)/")!),
            stream,
        ]
        let read = Task { await thrownError { _ = try await stream.read(minLength: 1, maxLength: 1, timeout: 0) } }
        for (index, task) in tasks.enumerated() {
            let before = listener.connecting()
            task.resume()
            let connecting = await finishing(within: Self.bound) { () -> Bool in
                await poll { listener.connecting() > before }
                return true
            }
            #expect(connecting == true, "task \(index) sent its SYN")
            task.cancel()
            let ended = await finishing(within: Self.bound) { await completion(of: task) }
            #expect(ended??.reason == .cancelled, "task \(index): \(String(describing: ended))")
        }
        #expect(await finishing(within: Self.bound) { await read.value } != nil, "the read came back")
    }

    /// A read on a stream task that was never resumed waits for the connection, but not past
    /// the cancellation of the Swift task that awaits it.
    @Test func aStreamTaskReadHonoursItsSwiftTasksCancellation() async throws {
        let session = try makeSession()
        let task = session.streamTask(withHostName: "127.0.0.1", port: 9)
        let reader = Task { try await task.read(minLength: 1, maxLength: 10, timeout: 0) }
        reader.cancel()
        let result = await finishing(within: Self.bound) { await reader.result }
        #expect(result != nil, "the cancelled read came back")
        if case .success? = result { Issue.record("a cancelled read returned bytes") }
        task.cancel()
    }

    /// A write with no timeout to a peer that never reads waits while the sockets' buffers
    /// are full, but not past the cancellation of the Swift task that awaits it; the stream
    /// task stays usable for the task's own `cancel()`. Cancelled once the kernel holds bytes
    /// the peer has not taken (a state, not a time). Before, the write waited until the task
    /// itself was cancelled.
    @Test func aStreamTaskWriteHonoursItsSwiftTasksCancellation() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let session = try makeSession()
        defer { session.invalidateAndCancel() }
        let task = session.streamTask(withHostName: "127.0.0.1", port: listener.port)
        task.resume()
        let writer = Task { try await task.write(Data(count: 64 << 20), timeout: 0) }
        let held = await finishing(within: Self.bound) { () -> Bool in
            await poll { unacknowledgedBytes(toPort: listener.port) > 0 }
            return true
        }
        #expect(held == true, "the peer holds up the write")
        writer.cancel()
        let result = await finishing(within: Self.bound) { await writer.result }
        #expect(result != nil, "the cancelled write came back")
        if case .failure(let error)? = result {
            #expect((error as? FerryError)?.reason == .cancelled, "\(error)")
        } else if result != nil {
            Issue.record("a write the peer never read returned")
        }
        task.cancel()
        let ended = await finishing(within: Self.bound) { await completion(of: task) }
        #expect(ended??.reason == .cancelled, "\(String(describing: ended))")
    }

    /// `closeWrite()` and `closeRead()` after a write the peer never read (it gave up at its
    /// timeout, its bytes still queued): both come back, at the session's 2 s, and the task
    /// ends when cancelled. Before, `closeWrite()` waited for as long as the peer did not
    /// read.
    @Test func closingAStreamTaskWithUnsentBytesComesBack() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let session = try makeSession { $0.timeoutIntervalForRequest = 2 }
        defer { session.invalidateAndCancel() }
        let task = session.streamTask(withHostName: "127.0.0.1", port: listener.port)
        task.resume()
        let write = await thrownError { try await task.write(Data(count: 64 << 20), timeout: 0.5) }
        #expect((write as? FerryError)?.reason == .timedOut(.idle), "\(String(describing: write))")
        let closed = await finishing(within: Self.bound) { () -> Bool in
            await task.closeWrite()
            await task.closeRead()
            return true
        }
        #expect(closed == true, "closing came back")
        task.cancel()
        #expect(await finishing(within: Self.bound) { await completion(of: task) } != nil, "the task ended")
    }

    /// Two `startSecureConnection()` calls at once: the second used to overwrite the first's
    /// continuation, which then never resumed. Now the second is refused, and the first comes
    /// back when the task ends.
    @Test func aSecondStartSecureConnectionIsRefusedAndTheFirstComesBack() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let session = try makeSession()
        let task = session.streamTask(withHostName: "127.0.0.1", port: listener.port)
        task.resume()
        let outcomes = MutexBox<[FerryError?]>([])
        let counter = CallTally()
        let calls = (0..<2).map { _ in
            Task {
                let error = await thrownError { try await task.startSecureConnection() }
                outcomes.mutate { $0.append(error as? FerryError) }
                counter.record()
            }
        }
        // One of the two is refused at once (the other waits for a server that never answers).
        #expect(await counter.ran(within: Self.bound))
        #expect(outcomes.value.first??.reason == .invalidRequest, "\(outcomes.value)")
        task.cancel()
        for call in calls {
            #expect(await finishing(within: Self.bound) { await call.value } != nil, "both calls came back")
        }
        #expect(outcomes.value.count == 2)
    }

    /// A handshake with a server that never answers it waited for ever: it now ends at the
    /// session's request timeout, and the task with it.
    @Test func startSecureConnectionEndsAtTheSessionsTimeout() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let session = try makeSession { $0.timeoutIntervalForRequest = 1 }
        let task = session.streamTask(withHostName: "127.0.0.1", port: listener.port)
        task.resume()
        let call = Task { await thrownError { try await task.startSecureConnection() } as? FerryError }
        let error = await finishing(within: Self.bound) { await call.value }
        #expect(error??.reason == .timedOut(.idle), "\(String(describing: error??.message))")
        #expect(await finishing(within: Self.bound) { await completion(of: task) } != nil, "the task completed")
    }

    /// ...and at the caller's cancellation, without waiting for the timeout.
    @Test func startSecureConnectionHonoursItsSwiftTasksCancellation() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let session = try makeSession()
        let task = session.streamTask(withHostName: "127.0.0.1", port: listener.port)
        task.resume()
        // Connected first, so the handshake itself is what is waited for.
        try await task.write(Data(), timeout: 10)
        let call = Task { await thrownError { try await task.startSecureConnection() } as? FerryError }
        call.cancel()
        let error = await finishing(within: Self.bound) { await call.value }
        #expect(error??.reason == .cancelled, "\(String(describing: error))")
        task.cancel()
    }

    // MARK: Upgrades

    /// An upgrade through an HTTP proxy that accepts and never answers (its `CONNECT`
    /// unanswered), and a stream task through it: both end at the session's timeout.
    @Test func anUpgradeAndAStreamTaskThroughASilentProxyComeBack() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let session = try makeSession {
            $0.proxy = .http(host: "127.0.0.1", port: listener.port)
            $0.timeoutIntervalForRequest = 1
        }
        var request = URLRequest(url: URL(string: "http://127.0.0.1:9/chat")!)
        request.setValue("websocket", forHTTPHeaderField: "Upgrade")
        request.setValue("Upgrade", forHTTPHeaderField: "Connection")
        let upgrade = Task { await thrownError { _ = try await session.data(for: request) } as? FerryError }
        let error = await finishing(within: Self.bound) { await upgrade.value }
        #expect(error != nil, "the upgrade came back")
        #expect(error??.reason == .timedOut(.idle), "\(String(describing: error??.message))")

        let stream = session.streamTask(withHostName: "127.0.0.1", port: 9)
        stream.resume()
        let read = Task { await thrownError { _ = try await stream.read(minLength: 1, maxLength: 1, timeout: 0) } }
        #expect(await finishing(within: Self.bound) { await read.value } != nil, "the read came back")
        let ended = await finishing(within: Self.bound) { await completion(of: stream) }
        #expect(ended??.reason == .timedOut(.idle), "\(String(describing: ended))")
    }

    /// An upgrade whose server redirects it in a loop ends with the request loop's error, as
    /// a request does, after a few hops (not at the hop limit, not never).
    @Test func anUpgradeRedirectedInALoopComesBack() async throws {
        try await withServer { server in
            let session = try makeSession { $0.maximumRedirects = 50 }
            var request = URLRequest(url: server.url("/loop/a"))
            request.setValue("websocket", forHTTPHeaderField: "Upgrade")
            request.setValue("Upgrade", forHTTPHeaderField: "Connection")
            let upgrade = Task { await thrownError { _ = try await session.data(for: request) } as? FerryError }
            let error = await finishing(within: Self.bound) { await upgrade.value }
            #expect(error??.reason == .redirectFailed, "\(String(describing: error))")
            #expect(server.requests(to: "/loop").count < 10)
        }
    }

    // MARK: Interceptors

    /// An interceptor that retries every error status after an hour, telling when it decided.
    private struct PatientInterceptor: RequestInterceptor {
        let decided = CallTally()

        func retry(
            _ request: URLRequest,
            for session: Session,
            dueTo failure: RequestFailure,
            attemptCount: Int
        ) async -> RetryDecision {
            decided.record()
            return .retryWithDelay(.seconds(3600))
        }
    }

    /// A task cancelled while it waits out its interceptor's retry delay completes, cancelled,
    /// without sending again: the wait is not a place the cancellation cannot reach.
    @Test func aTaskCancelledDuringItsInterceptorsRetryDelayComesBack() async throws {
        try await withServer { server in
            let interceptor = PatientInterceptor()
            let session = try makeSession { $0.interceptor = interceptor }
            let task = session.dataTask(with: server.url("/status/503"))
            task.resume()
            await interceptor.decided.firstCall()
            task.cancel()
            let ended = await finishing(within: Self.bound) { await completion(of: task) }
            #expect(ended??.reason == .cancelled, "\(String(describing: ended))")
            #expect(server.requests(to: "/status/503").count == 1)
        }
    }

    // MARK: Request bodies

    /// `httpBodyStream` read inside the async body iterator blocked a thread of the
    /// cooperative pool: more uploads from streams that wait for their writer (here FIFOs,
    /// as Foundation on Linux has no bound stream pair) than the pool has threads parked
    /// every thread, and the writers, tasks on the same pool, never ran.
    @Test func uploadsFromBlockingStreamsLeaveTheCooperativePoolFree() async throws {
        try await withServer { server in
            let session = try makeSession { $0.httpMaximumConnectionsPerHost = 16 }
            let directory = try makeTemporaryDirectory("fifos")
            let count = ProcessInfo.processInfo.activeProcessorCount + 2
            let size = 256 * 1024
            let body = TestContent.data(size: Int64(size), seed: 8)
            var tasks: [DataTask] = []
            for index in 0..<count {
                let fifo = directory.appendingPathComponent("body-\(index)")
                #expect(mkfifo(fifo.path, 0o600) == 0)
                var request = URLRequest(url: server.url("/sink"), method: .put)
                request.httpBodyStream = InputStream(fileAtPath: fifo.path)
                request.setValue("\(size)", forHTTPHeaderField: "Content-Length")
                let task = session.dataTask(with: request)
                task.resume()
                tasks.append(task)
            }
            // The writers: tasks on the same pool that never block it (non-blocking opens and
            // writes, waiting for the reader between tries).
            for index in 0..<count {
                let path = directory.appendingPathComponent("body-\(index)").path
                Task { try await writeWithoutBlocking(body, toFIFO: path) }
            }
            for task in tasks {
                let ended = await finishing(within: Self.bound) { await collectEvents(task.events).count }
                #expect(ended != nil, "\(task) came back")
                if ended == nil { task.cancel() }
                let report = try? JSONDecoder().decode(SinkReport.self, from: task.receivedData ?? Data())
                #expect(report?.sha256 == TestContent.sha256(size: Int64(size), seed: 8))
            }
        }
    }

    // MARK: Completion handlers

    /// An upload from a file that does not exist fails as it is made, before its handler is
    /// set: the handler used never to run.
    @Test func anUploadFromAMissingFileCallsItsHandlerOnce() async throws {
        let session = try makeSession()
        let missing = try makeTemporaryDirectory("missing").appendingPathComponent("nothing-here")
        let calls = CallTally()
        let failure = MutexBox<FerryError?>(nil)
        var request = URLRequest(url: URL(string: "http://127.0.0.1:9/sink")!)
        request.httpMethod = "PUT"
        let task = session.uploadTask(with: request, fromFile: missing) { _, _, error in
            failure.mutate { $0 = error }
            calls.record()
        }
        task.resume()
        #expect(await calls.ran(within: Self.bound), "the handler ran")
        #expect(failure.value?.reason == .uploadBodyFailed, "\(String(describing: failure.value))")
        // A later task's handler runs after it in the same delivery context: by then a second
        // call of the first handler would have happened.
        try await withServer { server in
            let later = CallTally()
            session.dataTask(with: URLRequest(url: server.url("/bytes/1"))) { _, _, _ in later.record() }.resume()
            await later.firstCall()
        }
        #expect(calls.count == 1)
    }

    /// The manager's callback forms on an invalidated session: exactly one of `success` and
    /// `failure` runs, as documented (neither used to).
    @Test func theManagersCallbacksRunOnAnInvalidatedSession() async throws {
        let session = try makeSession()
        let manager = HTTPSessionManager(baseURL: URL(string: "http://127.0.0.1:9/"), session: session)
        session.invalidateAndCancel()
        let calls = CallTally()
        let reason = MutexBox<FerryError.Reason?>(nil)
        manager.get(
            "anything",
            success: { _, _ in calls.record() },
            failure: { _, error in
                reason.mutate { $0 = error.reason }
                calls.record()
            }
        )
        #expect(await calls.ran(within: Self.bound), "a callback ran")
        #expect(reason.value == .sessionInvalidated)
        #expect(calls.count == 1)
    }
}

/// A TCP listener on a free loopback port that never accepts: connections to it complete
/// (the kernel's backlog takes them) and nothing is ever answered.
final class SilentListener: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        (descriptor, port) = try boundLoopbackSocket()
        guard listen(descriptor, 16) == 0 else {
            Glibc.close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
    }

    func close() { Glibc.close(descriptor) }

    /// The connections in the listener's backlog: every one made to it so far (it never
    /// accepts; one its client closed stays there too).
    func pendingConnections() -> Int {
        var info = tcp_info()
        var length = socklen_t(MemoryLayout<tcp_info>.size)
        guard getsockopt(descriptor, Int32(IPPROTO_TCP), Int32(TCP_INFO), &info, &length) == 0 else { return 0 }
        // For a listening socket the kernel reports its accept queue's length here.
        return Int(info.tcpi_unacked)
    }
}

/// A port no connection to completes, as a host behind a firewall that drops packets: a
/// listener whose accept queue (of one) is full, so the kernel drops every further SYN; the
/// clients wait in SYN_SENT, retrying, for minutes.
final class UnreachableListener: Sendable {
    let port: Int
    private let descriptor: Int32
    private let filler: Int32

    init() throws {
        (descriptor, port) = try boundLoopbackSocket()
        filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let filled =
            listen(descriptor, 0) == 0
            && withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
        guard filled else {
            Glibc.close(filler)
            Glibc.close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
    }

    /// Clients waiting for the listener to answer their SYN.
    func connecting() -> Int { connections(toPort: port, inState: "02") }

    func close() {
        Glibc.close(filler)
        Glibc.close(descriptor)
    }
}

/// A TCP socket bound to a free loopback port, not listening yet; and the port.
func boundLoopbackSocket() throws -> (descriptor: Int32, port: Int) {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
        }
    }
    guard bound else {
        Glibc.close(descriptor)
        throw POSIXError(.EADDRINUSE)
    }
    return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
}

/// Writes `body` into the FIFO at `path` and closes it, without ever blocking the calling
/// thread: opens and writes are non-blocking, and the task sleeps briefly while the FIFO has
/// no reader yet (a minute at most) or is full.
private func writeWithoutBlocking(_ body: Data, toFIFO path: String) async throws {
    var descriptor: Int32 = -1
    for _ in 0..<12_000 where descriptor < 0 {
        descriptor = open(path, O_WRONLY | O_NONBLOCK)
        if descriptor < 0 {
            guard errno == ENXIO else { return }  // no reader yet
            try await Task.sleep(for: .milliseconds(5))
        }
    }
    guard descriptor >= 0 else { return }
    defer { close(descriptor) }
    var offset = 0
    while offset < body.count {
        let written = body.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
        if written > 0 {
            offset += written
        } else if errno == EAGAIN || errno == EINTR {
            try await Task.sleep(for: .milliseconds(5))
        } else {
            return
        }
    }
}
