import NIOPosix
import Synchronization

/// Runs a download's checkpoints on NIO's pool for blocking work, one at a time, while the
/// download goes on writing.
///
/// Lifecycle: made for one body; ``start(_:)`` from the writing loop whenever a checkpoint
/// is due (a checkpoint still running makes it a no-op: the next chunk asks again);
/// ``finish()`` once the body ended or failed, before anything else touches the file or its
/// metadata, so that no checkpoint can land after the file was cut, discarded or described
/// anew. A checkpoint that failed (a full disk) fails the download at the next
/// ``start(_:)`` or at ``finish()``, as a checkpoint on the writing path did.
///
/// Thread-safe: the work runs on a pool thread and reports back under a lock.
final class CheckpointsAside: Sendable {
    private struct State {
        var running: Task<Void, Never>?
        var busy = false
        var failure: (any Error)?
    }

    private let state = Mutex(State())

    /// Whether a checkpoint runs now (a due one waits for a later chunk).
    var isBusy: Bool { state.withLock { $0.busy } }

    /// Starts `work` unless a checkpoint still runs; whether it started.
    ///
    /// - Throws: the error of the checkpoint before, if it failed.
    func start(_ work: @escaping @Sendable () throws -> Void) throws -> Bool {
        let started = try state.withLock { state throws -> Bool in
            if let failure = state.failure {
                state.failure = nil
                throw failure
            }
            guard !state.busy else { return false }
            state.busy = true
            return true
        }
        guard started else { return false }
        let task = Task {
            let failure: (any Error)?
            do {
                try await NIOThreadPool.singleton.runIfActive(work)
                failure = nil
            } catch {
                failure = error
            }
            state.withLock { state in
                state.busy = false
                if let failure { state.failure = failure }
            }
        }
        state.withLock { $0.running = task }
        return true
    }

    /// Waits for the checkpoint that runs, if any.
    ///
    /// The wait ends when its `fsync` and its metadata's write end (or NIO's pool refuses the
    /// work at shutdown): it does not depend on the network.
    ///
    /// - Throws: the error of the last checkpoint, if it failed.
    func finish() async throws {
        let running = state.withLock { $0.running }
        await running?.value
        let failure: (any Error)? = state.withLock { state in
            defer { state.failure = nil }
            return state.failure
        }
        if let failure { throw failure }
    }
}
