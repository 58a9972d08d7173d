import AsyncHTTPClient
import NIOCore
import Synchronization

/// Feeds a request body to AsyncHTTPClient's stream writer, and ends it the moment its last
/// byte is handed over.
///
/// Why it exists: a server may answer as soon as it has read the whole body, and close the
/// connection (gunicorn does, with `Connection: close`). AsyncHTTPClient treats a response
/// that ends with the connection while the request body is still open as
/// `remoteConnectionClosed`, even when the response is complete. A body of known length must
/// therefore send its end right after its last chunk, with no round trip between them: the
/// pump completes the body in the last write's completion callback, which runs on the event
/// loop in the same turn as the write, so no response or close can be handled in between.
/// Earlier chunks wait for the writer's future (the connection's back-pressure), so at most
/// about one chunk is in flight beyond the socket's buffer.
///
/// A body of unknown length is sent chunked: its end is the terminating chunk, which the
/// server needs before it can answer, so there is no race to avoid there.
///
/// A server that answers 300 or more before it has the whole body (413, 401) makes
/// AsyncHTTPClient stop taking the body: ``hold()`` then keeps the pump from writing or
/// ending it (an end after that fails the request with a length mismatch) until ``stop()``;
/// a last chunk the client refused for that reason is not followed by an end either.
///
/// Lifecycle: ``start(_:length:writer:on:)`` once, from the stream closure of the request
/// body; ``hold()`` on an early answer; ``stop()`` when the response is over (or abandoned):
/// the pump stops waiting and reading. Thread-safe.
final class RequestBodyPump: Sendable {
    private struct State: Sendable {
        var waiter: CheckedContinuation<Void, any Error>?
        var task: Task<Void, Never>?
        var stopped = false
        var held = false
        /// The body's end, kept back because its last chunk was refused (an early answer):
        /// failed at ``stop()``.
        var withheldEnd: (promise: EventLoopPromise<Void>, error: any Error)?
    }

    private let state = Mutex(State())

    /// Starts pumping `chunks` into `writer`; the returned future completes when the body
    /// has ended (or failed), as AsyncHTTPClient's stream closure expects.
    func start(
        _ chunks: CountingChunks,
        length: Int64?,
        writer: HTTPClient.Body.StreamWriter,
        on eventLoop: any EventLoop
    ) -> EventLoopFuture<Void> {
        let done = eventLoop.makePromise(of: Void.self)
        let task = Task {
            do {
                var iterator = chunks.makeAsyncIterator()
                var sent: Int64 = 0
                while let chunk = try await iterator.next() {
                    try await waitWhileHeld()
                    sent += Int64(chunk.readableBytes)
                    let written = writer.write(.byteBuffer(chunk))
                    if let length, sent >= length {
                        // The last byte is handed over: the end follows it on the event loop,
                        // in the same turn as the write completes (no round trip through this
                        // task, see the type's comment). A last chunk the client refused (an
                        // answer of 300 or more came first, so it stopped taking the body)
                        // must not be followed by an end, which it would count as a length
                        // mismatch: that end waits for ``stop()``.
                        written.whenComplete { result in
                            switch result {
                            case .success: done.succeed()
                            case .failure(let error): self.withhold(done, error: error)
                            }
                        }
                        return
                    }
                    try await wait(for: written)
                }
                try await waitWhileHeld()
                done.succeed()
            } catch {
                done.fail(error)
            }
        }
        let stopped = state.withLock { state in
            state.task = task
            return state.stopped
        }
        if stopped { task.cancel() }
        return done.futureResult
    }

    /// Keeps the body's end back until ``stop()``.
    private func withhold(_ end: EventLoopPromise<Void>, error: any Error) {
        let stopped = state.withLock { state in
            if !state.stopped { state.withheldEnd = (end, error) }
            return state.stopped
        }
        if stopped { end.fail(error) }
    }

    /// An early answer came: write and end nothing more until ``stop()``.
    func hold() { state.withLock { $0.held = true } }

    /// Returns at once unless held; a held pump waits for ``stop()`` and throws.
    private func waitWhileHeld() async throws {
        guard state.withLock({ $0.held || $0.stopped }) else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let stopped = state.withLock { state in
                if !state.stopped { state.waiter = continuation }
                return state.stopped
            }
            if stopped { continuation.resume(throwing: CancellationError()) }
        }
    }

    /// The response is over: stop waiting for the writer and reading the body.
    func stop() {
        let (waiter, task, withheld) = state.withLock { state in
            state.stopped = true
            defer {
                state.waiter = nil
                state.withheldEnd = nil
            }
            return (state.waiter, state.task, state.withheldEnd)
        }
        task?.cancel()
        waiter?.resume(throwing: CancellationError())
        if let withheld { withheld.promise.fail(withheld.error) }
    }

    /// Waits for `future`, or until ``stop()``.
    private func wait(for future: EventLoopFuture<Void>) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let stopped = state.withLock { state in
                if !state.stopped { state.waiter = continuation }
                return state.stopped
            }
            if stopped {
                continuation.resume(throwing: CancellationError())
                return
            }
            future.whenComplete { result in
                let waiter = self.state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(with: result)
            }
        }
    }
}
