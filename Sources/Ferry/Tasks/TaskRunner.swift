/// Runs the transfer of a task that has just been resumed: where its bytes move is decided
/// once, when the session is made (``LocalRunner`` in this process, ``BackgroundLink`` in the
/// daemon), not at each ``SessionTask/resume()``.
///
/// ## Contract
/// ``launch(_:priority:in:)`` is called exactly once per task, with the task's lock held (its
/// state machine has just said `startTransfer`; `priority` is read under that lock), so it
/// must not call back into the task before it returns; it may take the per-host limiter's lock (the lock order is task, then limiter).
/// The Swift task it returns runs the transfer and ends it by calling
/// ``SessionTask/transferDidFinish(error:outcome:)`` once; cancelling that Swift task stops
/// the transfer (``SessionTask/cancel()`` does).
protocol TaskRunner: Sendable {
    func launch(_ task: SessionTask, priority: Float, in session: Session) -> Task<Void, Never>
}

/// Runs tasks in this process: a ``Transfer`` each, under the session's per-host limit.
struct LocalRunner: TaskRunner {
    func launch(_ task: SessionTask, priority: Float, in session: Session) -> Task<Void, Never> {
        // A stream task's connection is no HTTP connection: not under the per-host limit.
        if case .socket(let connection) = task.plan {
            return Task { await connection.run(task, session: session) }
        }
        // The place in the per-host queue is taken now, so tasks resumed one after another
        // start in that order (their Swift tasks may run in any order), higher priorities
        // first.
        let admission = task.originalRequest.url.map {
            session.engine.limiter.reserve(for: Origin($0), priority: priority)
        }
        return Task { await Transfer(task: task, session: session, admission: admission).run() }
    }
}

extension BackgroundLink: TaskRunner {
    /// Hands the task to the daemon and waits there for its end (see ``run(_:session:)``).
    func launch(_ task: SessionTask, priority: Float, in session: Session) -> Task<Void, Never> {
        Task { await run(task, session: session) }
    }
}
