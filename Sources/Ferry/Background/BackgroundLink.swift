import Foundation
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A background session's side of the daemon: hands its download tasks over, reattaches the
/// tasks a previous process left, and delivers the daemon's events in order, each once.
///
/// ## Lifecycle and threading
/// A session without a delegate only hands tasks over: events need somebody to receive
/// them, so they wait in the daemon for a session with a delegate (Apple's background
/// sessions require one too). A session with a delegate attaches: it holds
/// `sessions/IDENTIFIER.lock` in the daemon's state directory (`flock(2)`, released by the
/// kernel however the process ends), so a second process that makes a session with the same
/// identifier gets an error instead of a second copy of the events. ``start(_:)`` then, in a
/// task of its own: finds or starts the daemon, makes a
/// ``DownloadTask`` for every task of the session that has not ended or has an event not
/// yet acknowledged, delivers the pending events one by one (acknowledging each after its
/// task has completed, `didFinishDownloadingTo` included), announces
/// `didFinishEventsForBackgroundSession`, then keeps polling for events and progress until
/// the session is invalidated. All mutable state is in one struct behind one lock.
final class BackgroundLink: Sendable {
    let identifier: String
    let locations: BackgroundLocations
    let client: BackgroundClient
    /// Where finished files wait for the delegate: inside the daemon's state directory.
    let downloads: URL
    private let options: SessionConfiguration.BackgroundDaemonOptions
    private let isDiscretionary: Bool
    /// Whether this session receives events (it has a delegate).
    let attaches: Bool
    /// The identifier, held while this session attaches.
    private let claim: ProcessClaim?

    private struct State {
        var closed = false
        /// Transfers waiting for their task's event, by daemon task id.
        var waiters: [Int64: CheckedContinuation<BackgroundEventRecord?, Never>] = [:]
        /// The poller waits here until a task has consumed its event.
        var handled: [Int64: CheckedContinuation<Void, Never>] = [:]
        /// Events that arrived before their transfer waited for them.
        var early: [Int64: BackgroundEventRecord] = [:]
        /// Daemon task ids this process knows (reattached or submitted).
        var known: Set<Int64> = []
        /// Known tasks that completed here (cancelled): their event needs no delivery.
        var finished: Set<Int64> = []
        /// Submissions whose id is not known yet.
        var submitting = 0
        var attached = false
        var attachError: FerryError?
        var attachWaiters: [CheckedContinuation<Void, Never>] = []
        var poller: Task<Void, Never>?
        var reported: [Int64: Int64] = [:]
    }

    private let state = Mutex(State())

    /// Claims the identifier for this process.
    ///
    /// - Throws: ``FerryError/Reason/unsupportedConfiguration`` when another process is
    ///   attached to the same identifier, ``FerryError/Reason/fileSystem`` when the state
    ///   directory cannot be made.
    init(identifier: String, configuration: SessionConfiguration, attaches: Bool) throws(FerryError) {
        self.identifier = identifier
        self.attaches = attaches
        options = configuration.backgroundDaemon
        isDiscretionary = configuration.isDiscretionary
        locations = BackgroundLocations(
            stateDirectory: options.stateDirectory?.path,
            socket: options.socket?.path
        )
        client = BackgroundClient(socket: locations.socket)
        let sessions = locations.stateDirectory.appendingPathComponent("sessions", isDirectory: true)
        downloads = sessions.appendingPathComponent(identifier, isDirectory: true)
            .appendingPathComponent("downloads", isDirectory: true)
        do {
            try FileManager.default.createDirectory(
                at: downloads,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            throw FerryError(.fileSystem, "Cannot create '\(downloads.path)'.", underlying: error)
        }
        guard attaches else {
            claim = nil
            return
        }
        guard let claim = try ProcessClaim(file: sessions.appendingPathComponent("\(identifier).lock")) else {
            throw FerryError(
                .unsupportedConfiguration,
                "Another process is attached to the background session '\(identifier)'; one at a time, so that each event is delivered once."
            )
        }
        self.claim = claim
    }

    deinit { close() }

    /// Stops polling and lets the identifier go (the session was invalidated).
    func close() {
        let (poller, waiters) = state.withLock { state in
            defer {
                state.closed = true
                state.poller = nil
                state.attachWaiters = []
            }
            return (state.poller, state.attachWaiters)
        }
        poller?.cancel()
        for waiter in waiters { waiter.resume() }
        claim?.release()
    }

    // MARK: Attaching and events

    func start(_ session: Session) {
        let weak = WeakSession(session)
        let poller = Task { [self] in await attachAndPoll(weak) }
        state.withLock { $0.poller = poller }
    }

    /// Returns once the tasks of a previous process are in the session (or attaching failed).
    func waitUntilAttached() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { state in
                guard !state.attached, !state.closed else { return true }
                state.attachWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    private func attachAndPoll(_ weak: WeakSession) async {
        var after: Int64 = 0
        do {
            try await BackgroundDaemonLauncher.ensureRunning(
                locations,
                executable: options.executable,
                start: options.startsDaemon
            )
            guard attaches else {
                attached(error: nil)
                return
            }
            let tasks = try await client.tasks(session: identifier)
            let pending = try await client.events(session: identifier, after: 0)
            let withEvents = Set(pending.map(\.taskId))
            guard let session = weak.value else { return }
            for record in tasks where !record.state.isFinal || withEvents.contains(record.id ?? 0) {
                guard let id = record.id else { continue }
                state.withLock { _ = $0.known.insert(id) }
                session.reattach(record, id: id).resume()
            }
            attached(error: nil)
            after = try await deliver(pending, after: 0)
            session.announceBackgroundEventsFinished()
        } catch {
            attached(error: error as? FerryError ?? FerryError(.network, "Cannot reach the daemon.", underlying: error))
            return
        }
        while !Task.isCancelled, let session = weak.value, !session.isInvalidated {
            do {
                try await Task.sleep(for: .milliseconds(200))
                after = try await deliver(try await client.events(session: identifier, after: after), after: after)
                try await reportProgress(to: session)
            } catch {
                // The daemon restarted or the sleep was cancelled: try again, or stop.
                if Task.isCancelled { return }
            }
        }
    }

    private func attached(error: FerryError?) {
        let waiters = state.withLock { state in
            state.attached = true
            state.attachError = error
            defer { state.attachWaiters = [] }
            return state.attachWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Hands each event to its task, in order, acknowledging each once its task completed.
    /// Returns the last sequence number handled.
    private func deliver(_ events: [BackgroundEventRecord], after: Int64) async throws -> Int64 {
        var last = after
        for event in events {
            guard let seq = event.seq else { continue }
            // A task submitted a moment ago may have ended before its id came back.
            while state.withLock({ !$0.known.contains(event.taskId) && $0.submitting > 0 }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                enum Next {
                    case skip
                    case parked
                    case hand(CheckedContinuation<BackgroundEventRecord?, Never>)
                }
                let next = state.withLock { state -> Next in
                    // Not this process's task, or one that already completed here.
                    guard state.known.contains(event.taskId), !state.finished.contains(event.taskId) else {
                        return .skip
                    }
                    state.handled[event.taskId] = done
                    guard let waiter = state.waiters.removeValue(forKey: event.taskId) else {
                        state.early[event.taskId] = event
                        return .parked
                    }
                    return .hand(waiter)
                }
                switch next {
                case .skip: done.resume()
                case .parked: break
                case .hand(let waiter): waiter.resume(returning: event)
                }
            }
            try await client.acknowledge(session: identifier, through: seq)
            last = seq
        }
        return last
    }

    private func reportProgress(to session: Session) async throws {
        let running = try await client.tasks(session: identifier).filter { $0.state == .running }
        for record in running {
            guard let id = record.id, let task = session.task(backgroundID: id) else { continue }
            let changed = state.withLock { state in
                defer { state.reported[id] = record.bytesReceived }
                return state.reported[id] != record.bytesReceived
            }
            if changed { task.backgroundProgress(received: record.bytesReceived, expected: record.bytesExpected) }
        }
    }

    // MARK: Running a task

    /// The transfer of a background session's task: submitted to the daemon (unless it is a
    /// reattached one), then waiting for its event and delivering the file.
    func run(_ task: SessionTask, session: Session) async {
        do {
            let outcome = try await transfer(task, session: session)
            task.transferDidFinish(error: nil, outcome: outcome)
        } catch {
            task.transferDidFinish(
                error: error as? FerryError
                    ?? FerryError(.network, "The background transfer failed.", underlying: error),
                outcome: nil
            )
        }
        if let id = task.backgroundID {
            let done = state.withLock { state in
                state.finished.insert(id)
                return state.handled.removeValue(forKey: id)
            }
            done?.resume()
        }
    }

    private func transfer(_ task: SessionTask, session: Session) async throws -> TaskOutcome {
        let delivery: DownloadDelivery?
        let source: URL?
        switch task.plan {
        case .download(let wanted, nil):
            (delivery, source) = (wanted, nil)
        case .upload(.file(let file, _)):
            (delivery, source) = (nil, file)
        default:
            throw FerryError(
                .unsupportedConfiguration,
                "Background sessions run downloads and uploads from files (data tasks and uploads from memory or streams are refused, as on Apple platforms)."
            )
        }
        await waitUntilAttached()
        if let error = state.withLock({ $0.attachError }) { throw error }
        let id: Int64
        if let known = task.backgroundID {
            id = known
        } else {
            id = try await submit(task, uploading: source)
        }
        // suspend() and resume() on the task pause and resume it in the daemon.
        let events = task.events
        let client = self.client
        let follower = Task {
            for await event in events {
                switch event {
                case .suspended: _ = try? await client.perform("pause", on: id)
                case .resumed: _ = try? await client.perform("resume", on: id)
                default: break
                }
            }
        }
        defer { follower.cancel() }
        let event = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<BackgroundEventRecord?, Never>) in
                enum Next {
                    case wait
                    case cancelled
                    case arrived(BackgroundEventRecord)
                }
                let next = state.withLock { state -> Next in
                    if let event = state.early.removeValue(forKey: id) { return .arrived(event) }
                    guard !Task.isCancelled else { return .cancelled }
                    state.waiters[id] = continuation
                    return .wait
                }
                switch next {
                case .wait: break
                case .cancelled: continuation.resume(returning: nil)
                case .arrived(let event): continuation.resume(returning: event)
                }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
        }
        guard let event else {
            // Cancelled here: the daemon discards its partial file too.
            _ = try? await client.perform("cancel", on: id)
            throw FerryError.cancelled()
        }
        switch event.kind {
        case .completed:
            guard let path = event.detail else {
                throw FerryError(.fileSystem, "The daemon reported no file for task \(id).")
            }
            let location = URL(fileURLWithPath: path)
            let url = task.originalRequest.url ?? location
            guard let delivery else { return try await response(of: id, task: task, url: url, body: location) }
            return try await Transfer.deliver(
                location,
                head: HTTPResponse(url: url, statusCode: 200),
                task: task,
                delivery: delivery
            )
        case .failed:
            throw FerryError(.network, event.detail ?? "The daemon's transfer failed.")
        case .canceled:
            throw FerryError.cancelled()
        }
    }

    /// An upload's response, as the daemon kept it: status and fields from its record, the
    /// body from the file it wrote (removed once read).
    private func response(of id: Int64, task: SessionTask, url: URL, body: URL) async throws -> TaskOutcome {
        let record = try await client.task(id)
        let head = HTTPResponse(
            url: url,
            statusCode: record.responseStatus ?? 200,
            headers: HeaderFields((record.responseHeaders ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        )
        task.didReceive(response: head)
        let data: Data
        do {
            data = try Data(contentsOf: body)
        } catch {
            throw FerryError(.fileSystem, "Cannot read the upload's response from '\(body.path)'.", underlying: error)
        }
        try? FileManager.default.removeItem(at: body)
        data.withUnsafeBytes { task.didReceive(data: $0, publishData: true) }
        return .data(data)
    }

    private func submit(_ task: SessionTask, uploading source: URL?) async throws -> Int64 {
        guard let url = task.originalRequest.url else { throw FerryError(.invalidURL, "The request has no URL.") }
        var request = BackgroundAPI.AddTask(
            url: url.absoluteString,
            destination: downloads.appendingPathComponent(UUID().uuidString).path,
            session: identifier
        )
        let headers = task.originalRequest.allHTTPHeaderFields ?? [:]
        request.headers = headers.isEmpty ? nil : headers
        request.priority = Double(task.priority)
        request.earliestBeginDate = task.earliestBeginDate
        request.discretionary = isDiscretionary ? true : nil
        request.taskDescription = task.taskDescription
        if let source {
            request.kind = .upload
            request.method = task.originalRequest.httpMethod ?? "POST"
            request.sourceFile = source.standardizedFileURL.path
            // Framing is the daemon's; the rest of the fields travel.
            request.headers = request.headers?.filter { $0.key.lowercased() != "content-length" }
        }
        state.withLock { $0.submitting += 1 }
        defer { state.withLock { $0.submitting -= 1 } }
        let record = try await client.add(request)
        guard let id = record.id else { throw FerryError(.badServerResponse, "The daemon returned a task without id.") }
        state.withLock { _ = $0.known.insert(id) }
        task.backgroundID = id
        return id
    }
}
