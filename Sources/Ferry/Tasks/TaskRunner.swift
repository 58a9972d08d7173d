import ServiceContextModule

/// Runs the transfer of a task that has just been resumed: where its bytes move is decided
/// once, when the session is made (``LocalRunner`` in this process, ``BackgroundLink`` in the
/// daemon), not at each ``SessionTask/resume()``.
///
/// ## Contract
/// ``launch(_:priority:in:)`` is called exactly once per task, with the task's lock held (its
/// state machine has just said `startTransfer`; `priority` is read under that lock), so it
/// must not call back into the task before it returns; it may take the per-host limiter's
/// lock (the lock order is task, then limiter). The Swift task behind the handle it returns
/// (made at once, or once the transfer may start) runs the transfer and ends it by calling
/// ``SessionTask/transferDidFinish(error:outcome:)`` once; cancelling the handle stops the
/// transfer (``SessionTask/cancel()`` does), whether or not its Swift task was made yet.
protocol TaskRunner: Sendable {
    func launch(_ task: SessionTask, priority: Float, in session: Session) -> TransferHandle
}

/// Runs tasks in this process: a ``Transfer`` each, under the session's per-host limit.
struct LocalRunner: TaskRunner {
    func launch(_ task: SessionTask, priority: Float, in session: Session) -> TransferHandle {
        // A stream task's connection is no HTTP connection: not under the per-host limit.
        if case .socket(let connection) = task.plan {
            return TransferHandle(started: Task { await connection.run(task, session: session) })
        }
        // The place in the per-host queue is taken now, so tasks resumed one after another
        // start in that order, higher priorities first.
        let engine = session.engine
        let admission = task.originalRequest.url.map {
            engine.limiter.reserve(for: Origin($0), priority: priority)
        }
        guard let admission, admission.waits else {
            return TransferHandle(
                started: Task { await Transfer(task: task, session: session, admission: admission).run() }
            )
        }
        // A task that must wait gets its Swift task only when its slot is granted (or it is
        // cancelled, or its resource timeout falls due). That task is made by whoever gives
        // the slot up, so it is given what it would have inherited from the code that resumed
        // the task: its priority, and its service context (the parent of the task's span,
        // and what loggers' metadata providers read).
        let context = ServiceContext.current
        let taskPriority = Task.currentPriority
        let resource = Duration.seconds(session.configuration.timeoutIntervalForResource)
        let handle = TransferHandle(resourceDeadline: .now + resource) { handle, inline in
            engine.watchdog.unwatch(handle)
            // Made inside the context: the task's span takes its parent from it.
            let body: @Sendable () async -> Void = {
                let run = { await Transfer(task: task, session: session, admission: admission).run(late: true) }
                guard let context else { return await run() }
                await ServiceContext.withValue(context) { await run() }
            }
            return inline
                ? Task.immediate(priority: taskPriority, operation: body)
                : Task(priority: taskPriority, operation: body)
        }
        // Watched before it can start, so that starting it always ends the watch.
        engine.watchdog.watch(handle)
        // Granted by the transfer that gives the slot up: started on its thread, so the
        // request goes out before that transfer's delivery, not after the executor's queue.
        let grantedAlready = engine.limiter.whenGranted(admission) {
            task.client.touch()  // waiting is not idleness: the idle timeout counts from here
            handle.start(inline: true)
        }
        if grantedAlready { handle.start() }
        return handle
    }
}

extension BackgroundLink: TaskRunner {
    /// Hands the task to the daemon and waits there for its end (see ``run(_:session:)``).
    func launch(_ task: SessionTask, priority: Float, in session: Session) -> TransferHandle {
        TransferHandle(started: Task { await run(task, session: session) })
    }
}
