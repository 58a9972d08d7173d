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
/// `didFinishEventsForBackgroundSession`, then follows the daemon's events (a long poll the
/// daemon answers as soon as an event is recorded) and samples progress between them, until
/// the session is invalidated. The bookkeeping is a value, ``BackgroundDelivery``, that
/// returns who to wake; it and the poller's task are the one struct behind the one lock.
/// The session hands tasks to the link as its ``TaskRunner``.
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
        var delivery = BackgroundDelivery<CheckedContinuation<Void, Never>>()
        var poller: Task<Void, Never>?
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

    /// Stops following the daemon's events and lets the identifier go (the session was
    /// invalidated).
    func close() {
        let (poller, woken) = state.withLock { state in
            defer { state.poller = nil }
            return (state.poller, state.delivery.close())
        }
        poller?.cancel()
        for waiter in woken { waiter.resume() }
        claim?.release()
    }

    // MARK: Attaching and events

    func start(_ session: Session) {
        let weak = WeakSession(session)
        let poller = Task { [self] in await attachAndFollow(weak) }
        state.withLock { $0.poller = poller }
    }

    /// Returns once the tasks of a previous process are in the session (or attaching failed).
    func waitUntilAttached() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            state.withLock { $0.delivery.waitForAttachment(continuation) }?.resume()
        }
    }

    private func attachAndFollow(_ weak: WeakSession) async {
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
                state.withLock { $0.delivery.reattached(id) }
                record.reattached(to: session, id: id).resume()
            }
            attached(error: nil)
            after = try await deliver(pending, after: 0)
            session.hub.publish(.didFinishEventsForBackgroundSession)
        } catch {
            attached(error: error as? FerryError ?? FerryError(.network, "Cannot reach the daemon.", underlying: error))
            return
        }
        // The daemon answers as soon as an event exists (a long poll), or after `wait` with
        // none: progress is sampled that often, ends are delivered at once.
        let wait = Duration.milliseconds(250)
        while !Task.isCancelled, let session = weak.value, !session.isInvalidated {
            do {
                let asked = ContinuousClock.now
                let events = try await client.events(session: identifier, after: after, wait: wait)
                after = try await deliver(events, after: after)
                try await reportProgress(to: session)
                // A daemon that does not wait (an older one) must not make this loop spin.
                if events.isEmpty, ContinuousClock.now - asked < wait {
                    try await Task.sleep(until: asked + wait)
                }
            } catch {
                // The daemon restarted or the task was cancelled: try again after a pause,
                // or stop.
                if Task.isCancelled { return }
                try? await Task.sleep(for: wait)
            }
        }
    }

    private func attached(error: FerryError?) {
        for waiter in state.withLock({ $0.delivery.attached(error: error) }) { waiter.resume() }
    }

    /// Hands each event to its task, in order, acknowledging each once its task completed.
    /// Returns the last sequence number handled.
    private func deliver(_ events: [BackgroundEventRecord], after: Int64) async throws -> Int64 {
        var last = after
        for event in events {
            guard let seq = event.seq else { continue }
            var offered = false
            while !offered {
                // Waits while a submission in flight may be this event's task (its id is not
                // back yet), then until the event's task consumed it.
                await withCheckedContinuation { (feed: CheckedContinuation<Void, Never>) in
                    switch state.withLock({ $0.delivery.offer(event, feed: feed) }) {
                    case .skip:
                        offered = true
                        feed.resume()
                    case .waitForSubmission:
                        break
                    case .deliver(let transfer):
                        offered = true
                        transfer?.resume()
                    }
                }
                if Task.isCancelled { return last }
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
            let changed = state.withLock { $0.delivery.report(record.bytesReceived, for: id) }
            if changed {
                task.client.backgroundProgress(received: record.bytesReceived, expected: record.bytesExpected)
            }
        }
    }

    // MARK: Running a task

    /// The transfer of a background session's task: submitted to the daemon (unless it is a
    /// reattached one), then waiting for its event and delivering the file.
    func run(_ task: SessionTask, session: Session) async {
        do {
            let outcome = try await transfer(task, session: session)
            task.client.transferDidFinish(error: nil, outcome: outcome)
        } catch {
            task.client.transferDidFinish(
                error: error as? FerryError
                    ?? FerryError(.network, "The background transfer failed.", underlying: error),
                outcome: nil
            )
        }
        if let id = task.client.backgroundID {
            state.withLock { $0.delivery.transferEnded(id) }?.resume()
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
        if let error = state.withLock({ $0.delivery.attachError }) { throw error }
        let id: Int64
        if let known = task.client.backgroundID {
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
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let action = state.withLock {
                    $0.delivery.waitForEvent(of: id, waiter: continuation, cancelled: Task.isCancelled)
                }
                switch action {
                case .wait: break
                case .ready, .cancelled: continuation.resume()
                }
            }
            return state.withLock { $0.delivery.takeEvent(of: id) }
        } onCancel: {
            state.withLock { $0.delivery.stopWaiting(id) }?.resume()
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
        task.client.didReceive(response: head)
        let data: Data
        do {
            data = try Data(contentsOf: body)
        } catch {
            throw FerryError(.fileSystem, "Cannot read the upload's response from '\(body.path)'.", underlying: error)
        }
        try? FileManager.default.removeItem(at: body)
        data.withUnsafeBytes { task.client.didReceive(data: $0, publishData: true) }
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
        state.withLock { $0.delivery.submissionStarted() }
        var id: Int64?
        defer { state.withLock { $0.delivery.submissionEnded(id: id) }?.resume() }
        let record = try await client.add(request)
        guard let added = record.id else {
            throw FerryError(.badServerResponse, "The daemon returned a task without id.")
        }
        id = added
        task.client.backgroundID = added
        return added
    }
}
