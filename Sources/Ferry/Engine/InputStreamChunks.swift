import Foundation

/// A Foundation `InputStream` (a request's `httpBodyStream`) as an async sequence of chunks,
/// read 64 KiB at a time on a thread of its own.
///
/// `InputStream.read` blocks until bytes arrive: a stream fed by another part of the
/// program (a pipe, a FIFO, a bound pair on Apple platforms) would park a thread of Swift's
/// cooperative pool, and with as many such uploads as the pool has threads, the code that
/// feeds them could never run. So the stream is opened, read and closed only on its
/// ``BlockingLane``; the iterator awaits each read, and a cancelled wait returns at once
/// (the read in progress finishes on the lane and is dropped).
///
/// `@unchecked Sendable`: the stream is touched only on its lane, one job at a time, by the
/// one iterator that ``ByteChunks/oneShot(_:)`` lets exist.
struct InputStreamChunks: AsyncSequence, @unchecked Sendable {
    typealias Element = Data
    let stream: InputStream

    init(_ stream: InputStream) { self.stream = stream }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: Reader(stream)) }

    struct AsyncIterator: AsyncIteratorProtocol {
        let reader: Reader

        func next() async throws -> Data? { try await reader.next() }
    }

    /// The stream and its lane; the lane ends when the iterator is dropped.
    final class Reader: @unchecked Sendable {
        private let stream: InputStream
        private let lane = BlockingLane(name: "ferry-httpBodyStream")
        /// Touched only on the lane.
        private var opened = false

        init(_ stream: InputStream) { self.stream = stream }

        deinit { lane.finish { [stream] in stream.close() } }

        func next() async throws -> Data? {
            try await lane.run { try self.readChunk() }
        }

        /// On the lane: opens the stream the first time, then reads one chunk.
        private func readChunk() throws -> Data? {
            if !opened {
                stream.open()
                opened = true
            }
            var chunk = Data(count: 64 * 1024)
            let count = chunk.withUnsafeMutableBytes { bytes in
                guard let base = bytes.baseAddress else { return 0 }
                return stream.read(base.assumingMemoryBound(to: UInt8.self), maxLength: bytes.count)
            }
            if count < 0 {
                let reason = stream.streamError.map { "\($0)" } ?? "an unknown error"
                stream.close()
                throw FerryError(.uploadBodyFailed, "Reading the request's httpBodyStream failed: \(reason).")
            }
            if count == 0 {
                stream.close()
                return nil
            }
            return chunk.prefix(count)
        }
    }
}

/// A thread of its own that runs blocking jobs one at a time, in order, for callers that
/// await them without holding a thread of the cooperative pool.
///
/// ## Lifecycle
/// The thread starts with the lane and ends after ``finish(then:)``, once the jobs queued
/// before it (and the last one given to it) have run.
///
/// ## Threading
/// ``run(_:)`` and ``finish(then:)`` may be called from any thread; jobs run on the lane's
/// thread only. `@unchecked Sendable`: every stored property is guarded by `condition`.
final class BlockingLane: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [() -> Void] = []
    private var finished = false

    init(name: String) {
        let thread = Thread { [self] in work() }
        thread.name = name
        thread.start()
    }

    /// Runs `job` on the lane and returns its result. A caller whose Swift task is
    /// cancelled gets `CancellationError` at once; the job still runs, and its result is
    /// dropped.
    func run<Value: Sendable>(_ job: @escaping @Sendable () throws -> Value) async throws -> Value {
        let once = Once<Value>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                once.set(continuation)
                enqueue { once.resume(with: Result { try job() }) }
            }
        } onCancel: {
            once.resume(with: .failure(CancellationError()))
        }
    }

    /// Lets the thread end once it has run the jobs queued so far and then `last`.
    func finish(then last: @escaping () -> Void) {
        condition.lock()
        jobs.append(last)
        finished = true
        condition.signal()
        condition.unlock()
    }

    private func enqueue(_ job: @escaping () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finished { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }

    /// A continuation resumed once, by the job or by a cancellation, whichever comes first
    /// (either may come before the continuation is set: the first is kept for then).
    private final class Once<Value: Sendable>: @unchecked Sendable {
        private let lock = NSLock()
        private var continuation: CheckedContinuation<Value, any Error>?
        private var pending: Result<Value, any Error>?
        private var resumed = false

        func set(_ continuation: CheckedContinuation<Value, any Error>) {
            lock.lock()
            guard let pending else {
                self.continuation = continuation
                lock.unlock()
                return
            }
            resumed = true
            lock.unlock()
            continuation.resume(with: pending)
        }

        func resume(with result: Result<Value, any Error>) {
            lock.lock()
            guard !resumed else {
                lock.unlock()
                return
            }
            guard let continuation else {
                if pending == nil { pending = result }
                lock.unlock()
                return
            }
            resumed = true
            self.continuation = nil
            lock.unlock()
            continuation.resume(with: result)
        }
    }
}
