import Dispatch

/// A task's progress handlers (``SessionTask/onUploadProgress(queue:_:)``,
/// ``SessionTask/onDownloadProgress(queue:_:)``) and which of their calls are due: a value
/// with no I/O. ``TaskClient`` makes the calls it returns in the task's delivery context.
///
/// A handler hears the counters as they move, a data task's received bytes coalesced in
/// time (``ProgressThrottle``), and once more at 100 % when the task succeeds, never the
/// same progress twice at the end.
///
/// Threading: a field of ``SessionTask/Storage``, changed under the task's lock.
struct ProgressHandlers: Sendable {
    /// One handler: where it is called and what it was told last.
    struct Handler: Sendable {
        let queue: DispatchQueue?
        let closure: @Sendable (TransferProgress) -> Void
        /// Coalesces a data task's received bytes, which come without their own events.
        var throttle = ProgressThrottle()
        /// The last call's progress, so the final one is not repeated.
        var lastReported: TransferProgress?

        init(queue: DispatchQueue?, closure: @escaping @Sendable (TransferProgress) -> Void) {
            self.queue = queue
            self.closure = closure
        }
    }

    /// A call due to a handler: made on the handler's queue, or where it is made when the
    /// handler has none.
    struct Call: Sendable {
        let queue: DispatchQueue?
        let closure: @Sendable (TransferProgress) -> Void
        let progress: TransferProgress

        func run() {
            if let queue {
                let closure = closure
                let progress = progress
                queue.async { closure(progress) }
            } else {
                closure(progress)
            }
        }
    }

    private(set) var upload: Handler?
    private(set) var download: Handler?

    /// The queues of the handlers set.
    var queues: [DispatchQueue] { [upload?.queue, download?.queue].compactMap { $0 } }

    /// Sets the upload (`upload`) or the download handler, replacing the one before.
    mutating func set(_ handler: Handler, upload: Bool) {
        if upload { self.upload = handler } else { download = handler }
    }

    /// The call due for the upload (`upload`) or download progress `completed` of `total`,
    /// if a handler is set.
    mutating func progress(upload: Bool, completed: Int64, total: Int64?) -> Call? {
        let progress = TransferProgress(completedBytes: completed, totalBytes: total)
        return upload ? Self.call(&self.upload, progress) : Self.call(&download, progress)
    }

    /// Counts `count` bytes of a data task's body for the download handler.
    ///
    /// - Returns: whether a call is due (``progress(upload:completed:total:)`` makes it).
    mutating func countReceived(_ count: Int64, now: ContinuousClock.Instant = .now) -> Bool {
        download?.throttle.add(count, now: now) != nil
    }

    /// The 100 % calls of a task that succeeded: what was done is the total, also when no
    /// length was announced. The upload handler hears it when a body was sent or announced;
    /// a handler that heard this progress last does not hear it again.
    mutating func finalCalls(sent: Int64, expectedToSend: Int64?, received: Int64) -> [Call] {
        var calls: [Call] = []
        if sent > 0 || expectedToSend != nil,
            let call = Self.call(
                &upload,
                TransferProgress(completedBytes: sent, totalBytes: sent),
                unlessRepeated: true
            )
        {
            calls.append(call)
        }
        let done = TransferProgress(completedBytes: received, totalBytes: received)
        if let call = Self.call(&download, done, unlessRepeated: true) { calls.append(call) }
        return calls
    }

    private static func call(
        _ handler: inout Handler?,
        _ progress: TransferProgress,
        unlessRepeated: Bool = false
    )
        -> Call?
    {
        guard let current = handler, !(unlessRepeated && current.lastReported == progress) else { return nil }
        handler?.lastReported = progress
        return Call(queue: current.queue, closure: current.closure, progress: progress)
    }
}
