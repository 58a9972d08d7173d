import Foundation
import NIOCore
import Synchronization

/// Where a streamed response goes (``Session/bytes(for:)``): its head to the caller waiting
/// for it, its body, chunk by chunk, into an async sequence the caller reads at its own pace.
///
/// ## Lifecycle
/// Made with the task, before it starts. The transfer calls ``deliver(_:)`` once with the
/// final response head, then ``yield(_:)`` for each chunk; the task's completion calls
/// ``taskCompleted(with:)`` exactly once, which ends the sequence (or fails the caller still
/// waiting for a head). The sequence is handed out once, by ``takeSequence()``.
///
/// ## Back-pressure
/// The body is a SwiftNIO `NIOThrowingAsyncSequenceProducer` with a high / low watermark:
/// once ``highWatermark`` chunks wait unread, ``yield(_:)`` suspends the transfer until the
/// reader has taken them down to ``lowWatermark``. The transfer then stops reading from the
/// connection, and TCP slows the server: memory stays bounded however large the body.
/// A reader that drops the sequence (or its iterator) terminates it, which cancels the task.
///
/// ## Thread safety
/// Every member may be called from any thread; state sits behind one lock, and
/// continuations are resumed after it is released.
final class ResponseStreamSink: Sendable {
    typealias Producer = NIOThrowingAsyncSequenceProducer<
        ByteBuffer, any Error, NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark, Demand
    >

    /// Chunks that may wait unread before the transfer stops reading.
    static let highWatermark = 8
    /// Unread chunks below which the transfer reads again.
    static let lowWatermark = 2

    private struct State {
        var head: Result<HTTPResponse, FerryError>?
        var headWaiter: CheckedContinuation<Result<HTTPResponse, FerryError>, Never>?
        var sequence: Producer?
        var ended = false
    }

    private let state: Mutex<State>
    private let source: Producer.Source
    let demand: Demand

    init() {
        let demand = Demand()
        let made = Producer.makeSequence(
            elementType: ByteBuffer.self,
            failureType: (any Error).self,
            backPressureStrategy: .init(lowWatermark: Self.lowWatermark, highWatermark: Self.highWatermark),
            finishOnDeinit: false,
            delegate: demand
        )
        self.demand = demand
        self.source = made.source
        self.state = Mutex(State(sequence: made.sequence))
    }

    /// The body's sequence, the first time it is asked for; `nil` after that.
    func takeSequence() -> Producer? {
        state.withLock { state in
            defer { state.sequence = nil }
            return state.sequence
        }
    }

    /// Waits for the final response head, or the error that ended the task before one came.
    func head() async -> Result<HTTPResponse, FerryError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Result<HTTPResponse, FerryError>? in
                if let head = state.head { return head }
                state.headWaiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The transfer has the final response: the caller of `bytes(for:)` gets it now.
    func deliver(_ head: HTTPResponse) {
        settleHead(.success(head))
    }

    /// Hands one chunk to the reader; suspends while the reader is ``highWatermark`` chunks
    /// behind.
    ///
    /// - Parameter waiting: Called with `true` before the transfer waits for the reader and
    ///   with `false` after: a reader's pace is not the server's idleness.
    /// - Throws: `CancellationError` when the transfer is cancelled or the reader is gone.
    func yield(_ chunk: ByteBuffer, waiting: (Bool) -> Void) async throws {
        switch source.yield(chunk) {
        case .produceMore:
            return
        case .stopProducing:
            waiting(true)
            defer { waiting(false) }
            try await demand.wait()
        case .dropped:
            throw CancellationError()
        }
    }

    /// The task completed: the sequence ends (with `error`, if any), and a caller still
    /// waiting for a head gets the error.
    func taskCompleted(with error: FerryError?) {
        let first = state.withLock { state in
            defer { state.ended = true }
            return !state.ended
        }
        guard first else { return }
        settleHead(.failure(error ?? FerryError(.badServerResponse, "The task completed without a response.")))
        demand.producerFinished()
        if let error { source.finish(error) } else { source.finish() }
    }

    private func settleHead(_ result: Result<HTTPResponse, FerryError>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<HTTPResponse, FerryError>, Never>? in
            guard state.head == nil else { return nil }
            state.head = result
            defer { state.headWaiter = nil }
            return state.headWaiter
        }
        waiter?.resume(returning: result)
    }
}

extension ResponseStreamSink {
    /// The reader's demand, as the producer's delegate hears of it: more wanted, or the
    /// reader gone (which cancels the task through ``onTerminate``).
    final class Demand: NIOAsyncSequenceProducerDelegate, Sendable {
        private struct State {
            /// `produceMore` came before the transfer began to wait for it.
            var pending = false
            var waiter: CheckedContinuation<Void, any Error>?
            var terminated = false
            var producerFinished = false
            var onTerminate: (@Sendable () -> Void)?
        }

        private let state = Mutex(State())

        /// What a reader that goes away does: cancel the task, unless the body already ended.
        func setOnTerminate(_ action: @escaping @Sendable () -> Void) {
            state.withLock { $0.onTerminate = action }
        }

        func produceMore() {
            let waiter = state.withLock { state in
                guard let waiter = state.waiter else {
                    state.pending = true
                    return nil as CheckedContinuation<Void, any Error>?
                }
                state.waiter = nil
                return waiter
            }
            waiter?.resume()
        }

        func didTerminate() {
            let (waiter, action) = state.withLock { state in
                state.terminated = true
                defer { state.waiter = nil }
                return (state.waiter, state.producerFinished ? nil : state.onTerminate)
            }
            waiter?.resume(throwing: CancellationError())
            action?()
        }

        func producerFinished() {
            state.withLock { $0.producerFinished = true }
        }

        /// Waits for the `produceMore` that follows a `stopProducing`, which may have come
        /// already.
        func wait() async throws {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let ready: Result<Void, any Error>? = state.withLock { state in
                        if state.terminated || Task.isCancelled { return .failure(CancellationError()) }
                        if state.pending {
                            state.pending = false
                            return .success(())
                        }
                        state.waiter = continuation
                        return nil
                    }
                    if let ready { continuation.resume(with: ready) }
                }
            } onCancel: {
                let waiter = state.withLock { state in
                    defer { state.waiter = nil }
                    return state.waiter
                }
                waiter?.resume(throwing: CancellationError())
            }
        }
    }
}
