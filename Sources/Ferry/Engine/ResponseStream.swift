import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// One request over AsyncHTTPClient's delegate API, handed to a Swift task as a response head
/// and a body sequence that the event loop reads ahead into.
///
/// Why not `HTTPClient.execute(_:deadline:)`: the body of its async response stops reading
/// after every buffer until the consuming task asks for the next one (a high watermark of
/// one buffer), so a download ping-pongs between the event loop and the task every ~64 KiB
/// and re-arms the socket each time. Here the event loop keeps reading into a bounded buffer
/// (``readAhead``) while the task writes, and the task takes everything buffered at once: it
/// is woken once per ``wakeBytes`` (or after ``wakeDelay`` for a slow trickle), not per
/// buffer, and the loop stops reading only while the buffer is full.
///
/// Every request goes through it; a request body is fed by a ``RequestBodyPump``, which the
/// stream stops when the response is over.
///
/// Lifecycle: ``start(_:on:)`` once; then ``head()``; then ``body``, iterated once, or
/// ``abandon()``, which closes the connection if the response is not complete. Always call
/// ``abandon()`` when done with the stream: after a complete response it only lets go of
/// buffers. Every method is thread-safe; the delegate callbacks arrive on the request's event
/// loop and never block.
final class ResponseStream: HTTPClientResponseDelegate, Sendable {
    typealias Response = Void

    /// Bytes the event loop reads ahead before it stops reading, for a transfer alone on its
    /// origin; concurrent ones share it (see ``Engine/readAhead(for:)``), down to
    /// ``minimumReadAhead`` each.
    static let readAhead = 512 << 10
    /// The least a stream reads ahead: twice ``wakeBytes``, so the loop reads on while the
    /// task writes what woke it.
    static let minimumReadAhead = 2 * wakeBytes
    /// Bytes buffered before a waiting task is woken.
    static let wakeBytes = 128 << 10
    /// How long fewer than ``wakeBytes`` wait before a waiting task is woken anyway.
    static let wakeDelay = TimeAmount.milliseconds(5)

    private struct State: Sendable {
        /// Stops the request on its connection: AsyncHTTPClient's task, or an HTTP/2 stream
        /// of Ferry's own (see ``HTTP2Pool``).
        var stop: (@Sendable () -> Void)?
        var head: HTTPResponseHead?
        var headWaiter: CheckedContinuation<HTTPResponseHead, any Error>?
        var parts = CircularBuffer<ByteBuffer>()
        var bufferedBytes = 0
        /// Set once the response ended: complete, or failed.
        var end: Result<Void, any Error>?
        var bodyWaiter: CheckedContinuation<CircularBuffer<ByteBuffer>, any Error>?
        /// The event loop waits on it while the buffer is full.
        var demand: EventLoopPromise<Void>?
        var wakeTimer: Scheduled<Void>?
        var abandoned = false
        var requestSentAt: Date?
        /// The response's trailer fields, once they came (Ferry's own HTTP/2 connections).
        var trailers: HTTPHeaders?
        /// The request has a body (fed by the pump).
        var sendsBody = false
        /// Body bytes still to come of an answer of 300 or more to a request with a body:
        /// see ``ResponseStream/didReceiveHead(task:_:)``.
        var earlyAnswerRemaining: Int64?
        /// Such an answer has arrived whole: its request is to be stopped.
        var earlyAnswerComplete: Bool { (earlyAnswerRemaining ?? 1) <= 0 }

        /// Everything buffered, for the task; the event loop may read again.
        mutating func takeParts() -> (CircularBuffer<ByteBuffer>, EventLoopPromise<Void>?) {
            let parts = self.parts
            self.parts = []
            bufferedBytes = 0
            defer { demand = nil }
            wakeTimer?.cancel()
            wakeTimer = nil
            return (parts, demand)
        }

        /// What ``ResponseStream/take()`` answers at once: everything buffered, or the end (an
        /// empty buffer, or the failure), or `nil` when it must wait for bytes.
        mutating func takeReady() -> (
            ready: Result<CircularBuffer<ByteBuffer>, any Error>?, demand: EventLoopPromise<Void>?
        ) {
            if !parts.isEmpty {
                let (parts, demand) = takeParts()
                return (.success(parts), demand)
            }
            switch end {
            case .success: return (.success([]), nil)
            case .failure(let error): return (.failure(error), nil)
            case nil: break
            }
            if abandoned { return (.failure(CancellationError()), nil) }
            return (nil, nil)
        }
    }

    private let state = Mutex(State())
    /// Called on the event loop whenever bytes arrive (the idle timeout's clock).
    private let onActivity: @Sendable () -> Void
    /// Feeds the request's body, if it has one.
    let pump = RequestBodyPump()

    /// This stream's read-ahead (``readAhead`` or a share of it).
    private let readAheadBytes: Int

    /// Told each interim (1xx) response that comes before the answer.
    private let onInformational: (@Sendable (HTTPResponseHead) -> Void)?

    init(
        readAhead: Int = ResponseStream.readAhead,
        onActivity: @escaping @Sendable () -> Void,
        onInformational: (@Sendable (HTTPResponseHead) -> Void)? = nil
    ) {
        self.readAheadBytes = max(Self.minimumReadAhead, readAhead)
        self.onActivity = onActivity
        self.onInformational = onInformational
    }

    /// The response's trailer section arrived, before its end. Only Ferry's own HTTP/2
    /// connections report them; AsyncHTTPClient's delegate API drops them.
    func receivedTrailers(_ fields: HTTPHeaders) {
        state.withLock { $0.trailers = fields }
    }

    /// The response's trailer fields, once its body ended with them.
    var trailers: HTTPHeaders? { state.withLock { $0.trailers } }

    /// An interim (1xx) response arrived (`103 Early Hints`): not the answer. Only Ferry's
    /// own HTTP/2 connections report them; AsyncHTTPClient drops them.
    func receivedInformational(_ head: HTTPResponseHead) {
        onActivity()
        onInformational?(head)
    }

    /// Starts `request` on `client` (its body, if any, fed by ``pump``), the delegate called
    /// on `eventLoop`, where the pool also prefers to find or open the connection, or must
    /// when `pinned`.
    func start(_ request: HTTPClient.Request, on client: HTTPClient, eventLoop: any EventLoop, pinned: Bool = false) {
        state.withLock { $0.sendsBody = request.body != nil }
        let preference: HTTPClient.EventLoopPreference =
            pinned ? .delegateAndChannel(on: eventLoop) : .delegate(on: eventLoop)
        let task = client.execute(request: request, delegate: self, eventLoop: preference, deadline: nil)
        attach { task.cancel() }
    }

    /// Gives the stream the way to stop its request (once it is on a connection); called at
    /// once when the stream was abandoned before, or an early answer completed it.
    func attach(stop: @escaping @Sendable () -> Void) {
        let stopNow = state.withLock { state -> Bool in
            state.stop = stop
            return (state.abandoned && state.end == nil) || state.earlyAnswerComplete
        }
        if stopNow { stop() }
    }

    /// Waits for the response head.
    func head() async throws -> HTTPResponseHead {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = state.withLock { state -> Result<HTTPResponseHead, any Error>? in
                    if let head = state.head { return .success(head) }
                    if case .failure(let error) = state.end { return .failure(error) }
                    if state.abandoned || state.end != nil { return .failure(CancellationError()) }
                    state.headWaiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            abandon()
        }
    }

    /// Everything buffered so far, waiting for bytes if there are none; empty at the end.
    func take() async throws -> CircularBuffer<ByteBuffer> {
        // Most takes find bytes (or the end) waiting: answered without a continuation, unless
        // the caller is cancelled, which the waiting path below turns into an abandon.
        if !Task.isCancelled {
            let (ready, demand) = state.withLock { $0.takeReady() }
            demand?.succeed()
            if let ready { return try ready.get() }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let (ready, demand) = state.withLock { state in
                    let taken = state.takeReady()
                    if taken.ready == nil { state.bodyWaiter = continuation }
                    return taken
                }
                demand?.succeed()
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            abandon()
        }
    }

    /// Done with this response: closes its connection unless the response is complete, and
    /// fails whoever still waits.
    func abandon() {
        let (stop, headWaiter, bodyWaiter, demand) = state.withLock { state in
            let cancel = !state.abandoned && state.end == nil
            state.abandoned = true
            let (_, demand) = state.takeParts()
            defer {
                state.headWaiter = nil
                state.bodyWaiter = nil
            }
            return (cancel ? state.stop : nil, state.headWaiter, state.bodyWaiter, demand)
        }
        demand?.succeed()
        headWaiter?.resume(throwing: CancellationError())
        bodyWaiter?.resume(throwing: CancellationError())
        stop?()
        pump.stop()
    }

    /// When the request's last byte was written, if it was.
    var requestSentAt: Date? { state.withLock { $0.requestSentAt } }

    // MARK: HTTPClientResponseDelegate (on the event loop)

    func didSendRequest(task: HTTPClient.Task<Void>) { requestSent() }

    func didReceiveHead(task: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        received(head)
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        received(buffer, on: task.eventLoop) ?? task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Void>) throws {
        finish(.success(()))
    }

    func didReceiveError(task: HTTPClient.Task<Void>, _ error: any Error) {
        finish(.failure(error))
    }

    // MARK: The feeding side (on the connection's event loop)

    /// The request's last byte was written.
    func requestSent() {
        let now = Date()
        state.withLock { $0.requestSentAt = now }
    }

    /// The final response head arrived.
    ///
    /// An answer of 300 or more to a request with a body makes AsyncHTTPClient stop the body
    /// and close the connection; in a race with the body's end (seen with a 308 to a small
    /// file upload) its delegate API then never reports the response's end. Such an answer
    /// with a known length is therefore complete here once its body has arrived: the stream
    /// ends and the request is stopped, closing the connection it would close anyway.
    func received(_ head: HTTPResponseHead) {
        onActivity()
        let (waiter, complete) = state.withLock { state in
            state.head = head
            if state.sendsBody, head.status.code >= 300 {
                pump.hold()
                let bodiless = [204, 304].contains(head.status.code)
                state.earlyAnswerRemaining =
                    bodiless ? 0 : head.headers.first(name: "content-length").flatMap { Int64($0) }
            }
            defer { state.headWaiter = nil }
            return (state.headWaiter, state.earlyAnswerRemaining == 0)
        }
        waiter?.resume(returning: head)
        if complete { completeEarlyAnswer() }
    }

    /// The early answer's body has arrived whole: end the stream, and stop the request.
    private func completeEarlyAnswer() {
        finish(.success(()))
        // Not attached yet: ``attach(stop:)`` stops it.
        state.withLock { $0.stop }?()
    }

    /// A part of the body arrived on `eventLoop`.
    ///
    /// - Returns: `nil` while the loop may read on; else a future it waits for before it
    ///   reads more, succeeded once the task has taken what is buffered (or gave up).
    func received(_ buffer: ByteBuffer, on eventLoop: any EventLoop) -> EventLoopFuture<Void>? {
        onActivity()
        let (wake, wait) = state.withLock {
            state -> (
                (CheckedContinuation<CircularBuffer<ByteBuffer>, any Error>, CircularBuffer<ByteBuffer>)?,
                EventLoopFuture<Void>?
            ) in
            if state.abandoned { return (nil, nil) }
            state.parts.append(buffer)
            state.bufferedBytes += buffer.readableBytes
            if let remaining = state.earlyAnswerRemaining {
                state.earlyAnswerRemaining = remaining - Int64(buffer.readableBytes)
            }
            if let waiter = state.bodyWaiter {
                if state.bufferedBytes >= Self.wakeBytes {
                    state.bodyWaiter = nil
                    // Nobody waits on the loop while a task waits for bytes.
                    return ((waiter, state.takeParts().0), nil)
                }
                if state.wakeTimer == nil {
                    state.wakeTimer = eventLoop.scheduleTask(in: Self.wakeDelay) { self.wakeWaiter() }
                }
            }
            guard state.bufferedBytes >= readAheadBytes else { return (nil, nil) }
            let promise = state.demand ?? eventLoop.makePromise(of: Void.self)
            state.demand = promise
            return (nil, promise.futureResult)
        }
        if let (waiter, parts) = wake { waiter.resume(returning: parts) }
        if state.withLock({ $0.earlyAnswerComplete && $0.end == nil }) { completeEarlyAnswer() }
        return wait
    }

    /// The wake timer fired: hand a waiting task whatever is buffered.
    private func wakeWaiter() {
        let wake = state.withLock {
            state -> (CheckedContinuation<CircularBuffer<ByteBuffer>, any Error>, CircularBuffer<ByteBuffer>)? in
            state.wakeTimer = nil
            guard let waiter = state.bodyWaiter, !state.parts.isEmpty else { return nil }
            state.bodyWaiter = nil
            return (waiter, state.takeParts().0)
        }
        if let (waiter, parts) = wake { waiter.resume(returning: parts) }
    }

    /// The response ended: a waiting task gets the rest (bytes before an error come first).
    func finish(_ end: Result<Void, any Error>) {
        pump.stop()
        let (headWaiter, bodyWaiter, demand) = state.withLock { state in
            if state.end == nil { state.end = end }
            var bodyWaiter:
                (
                    CheckedContinuation<CircularBuffer<ByteBuffer>, any Error>,
                    Result<CircularBuffer<ByteBuffer>, any Error>
                )?
            var demand: EventLoopPromise<Void>?
            if let waiter = state.bodyWaiter {
                state.bodyWaiter = nil
                let parts: CircularBuffer<ByteBuffer>
                (parts, demand) = state.takeParts()
                if parts.isEmpty, case .failure(let error) = end {
                    bodyWaiter = (waiter, .failure(error))
                } else {
                    bodyWaiter = (waiter, .success(parts))
                }
            }
            defer { state.headWaiter = nil }
            return (state.headWaiter, bodyWaiter, demand)
        }
        demand?.succeed()
        if let headWaiter {
            switch end {
            case .failure(let error): headWaiter.resume(throwing: error)
            case .success:
                headWaiter.resume(throwing: HTTPClientError.remoteConnectionClosed)
            }
        }
        if let (waiter, result) = bodyWaiter { waiter.resume(with: result) }
    }
}

/// A response body as the server sent it, in buffers read ahead by a ``ResponseStream`` (or
/// already read whole). The sequence ends when the response did, or throws its error.
/// Iterate it once; call ``abandon()`` when done with it.
///
/// With a ``throttle``, each buffer from the network is handed out only once the transfer's
/// bandwidth limits allow it: every consumer (a file, memory, a pipe, a streamed reader, a
/// segment) is paced in this one place, and the transfer stops reading while it waits.
struct ResponseBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    private enum Source: Sendable {
        case stream(ResponseStream)
        /// Read already, whole.
        case buffered(CircularBuffer<ByteBuffer>)
    }

    private let source: Source
    private let tally = ByteTally()
    /// The bandwidth limits network buffers are handed out under; a body already read whole
    /// (a cached response) is not paced.
    var throttle: Throttle?

    init(_ stream: ResponseStream) { source = .stream(stream) }
    init(buffered buffers: CircularBuffer<ByteBuffer>) { source = .buffered(buffers) }

    /// Bytes handed out so far by iterators of this body.
    var bytesRead: Int64 { tally.value }

    /// The trailer fields the body ended with, once it has (`nil`: none came, or the
    /// connection does not report them).
    var trailers: HTTPHeaders? {
        if case .stream(let stream) = source { return stream.trailers }
        return nil
    }

    /// Stops reading: closes the connection unless the response is complete.
    func abandon() {
        if case .stream(let stream) = source { stream.abandon() }
    }

    struct AsyncIterator: AsyncIteratorProtocol {
        private let stream: ResponseStream?
        private let tally: ByteTally
        private let throttle: Throttle?
        /// Buffers taken from the stream, not yet returned.
        private var pending = CircularBuffer<ByteBuffer>()
        private var ended = false

        fileprivate init(
            stream: ResponseStream?,
            buffered: CircularBuffer<ByteBuffer> = [],
            tally: ByteTally,
            throttle: Throttle? = nil
        ) {
            self.stream = stream
            self.tally = tally
            self.pending = buffered
            self.throttle = throttle
        }

        mutating func next() async throws -> ByteBuffer? {
            let buffer = try await nextBuffer()
            if let buffer {
                tally.add(buffer.readableBytes)
                try await throttle?.pace(Int64(buffer.readableBytes))
            }
            return buffer
        }

        private mutating func nextBuffer() async throws -> ByteBuffer? {
            if let buffer = pending.popFirst() { return buffer }
            guard !ended, let stream else { return nil }
            pending = try await stream.take()
            guard let buffer = pending.popFirst() else {
                ended = true
                return nil
            }
            return buffer
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        switch source {
        case .stream(let stream): AsyncIterator(stream: stream, tally: tally, throttle: throttle)
        case .buffered(let buffers): AsyncIterator(stream: nil, buffered: buffers, tally: tally)
        }
    }
}

extension ResponseBody {
    /// Every buffer of the body of `head`, at most `limit` bytes (an error response kept for
    /// the interceptor), read by the one ``BodyReader`` loop.
    ///
    /// - Throws: ``FerryError/Reason/bodyTooLarge(limit:)`` past `limit`; the body's error.
    func buffered(limit: Int64, of head: HTTPResponse) async throws -> CircularBuffer<ByteBuffer> {
        var buffers = CircularBuffer<ByteBuffer>()
        var reader = BodyReader(limit: .memory(limit), head: head)
        try await reader.read(self) { buffers.append($0) }
        return buffers
    }

    /// Reads a little of a body nobody wants, so its connection can be reused; a large one
    /// is abandoned (the connection is closed instead).
    func drain() async {
        var remaining = 64 * 1024
        do {
            for try await chunk in self {
                remaining -= chunk.readableBytes
                if remaining < 0 { break }
            }
        } catch {}
    }
}

/// A byte count shared by a body and its iterators.
private final class ByteTally: Sendable {
    private let count = Mutex<Int64>(0)
    var value: Int64 { count.withLock { $0 } }
    func add(_ bytes: Int) { count.withLock { $0 += Int64(bytes) } }
}

extension HTTPResponse {
    /// The response `head` that came for a request to `url`.
    init(url: URL, head: HTTPResponseHead) {
        self.init(
            url: url,
            statusCode: Int(head.status.code),
            reasonPhrase: head.status.reasonPhrase,
            headers: HeaderFields(head.headers.map { (name: $0.name, value: $0.value) }),
            httpVersion: "HTTP/\(head.version.major).\(head.version.minor)"
        )
    }
}
