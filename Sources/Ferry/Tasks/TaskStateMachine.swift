/// The lifecycle of one task as a value: takes events, returns what its owner must do.
///
/// No I/O happens here. ``SessionTask`` owns one behind its lock, feeds it `resume`,
/// `suspend`, `cancel` and what the transfer reports, and performs the returned actions
/// after leaving the lock. The machine guarantees the properties the rest of Ferry builds on:
///
/// - the transfer is started at most once;
/// - the task completes exactly once, whatever order cancel, suspend, resume and the
///   transfer's own end arrive in;
/// - once the transfer has committed to its outcome (``transferWillFinish()``), a late
///   `cancel()` changes nothing, so a moved download is never reported as cancelled;
/// - once `cancel()` has been accepted, the completion carries the cancel's reason.
struct TaskStateMachine: Sendable {
    enum State: Sendable, Equatable {
        /// Created and not yet resumed.
        case initial
        /// The transfer runs (or waits for a connection slot).
        case running
        /// Suspended after the transfer started: it holds its connection and reads nothing.
        case paused
        /// `cancel` was accepted; waiting for the transfer to stop.
        case canceling(FerryError)
        /// The transfer committed to its outcome; a cancel now comes too late.
        case finishing
        /// Done; the completion has been handed out.
        case completed
    }

    private(set) var state: State = .initial

    /// The state users see.
    var publicState: TaskState {
        switch state {
        case .initial, .paused: .suspended
        case .running, .finishing: .running
        case .canceling: .canceling
        case .completed: .completed
        }
    }

    enum ResumeAction: Sendable, Equatable {
        /// Start the transfer and report that the task resumed.
        case startTransfer
        /// Let the paused transfer read again and report that the task resumed.
        case unpause
        /// Nothing to do.
        case none
    }

    mutating func resume() -> ResumeAction {
        switch state {
        case .initial:
            state = .running
            return .startTransfer
        case .paused:
            state = .running
            return .unpause
        case .running, .canceling, .finishing, .completed:
            return .none
        }
    }

    /// A transfer that is already running (a data task's body continuing as a download)
    /// becomes this new task's. `false` when the task was cancelled first.
    mutating func adoptRunningTransfer() -> Bool {
        guard state == .initial else { return false }
        state = .running
        return true
    }

    enum SuspendAction: Sendable, Equatable {
        /// Stop reading and report that the task suspended.
        case pause
        case none
    }

    mutating func suspend() -> SuspendAction {
        switch state {
        case .running:
            state = .paused
            return .pause
        case .initial, .paused, .canceling, .finishing, .completed:
            return .none
        }
    }

    enum CancelAction: Sendable, Equatable {
        /// No transfer ever ran: complete now with this error.
        case completeWithoutTransfer(FerryError)
        /// Stop the transfer (and let a paused one run so it can see the stop); the
        /// completion follows when it reports back.
        case stopTransfer
        case none
    }

    mutating func cancel(_ error: FerryError) -> CancelAction {
        switch state {
        case .initial:
            state = .completed
            return .completeWithoutTransfer(error)
        case .running, .paused:
            state = .canceling(error)
            return .stopTransfer
        case .canceling, .finishing, .completed:
            return .none
        }
    }

    /// The transfer asks to commit to its outcome (move the file, hand out the body).
    /// `false` means a cancel came first: the transfer must stop and report instead.
    mutating func transferWillFinish() -> Bool {
        switch state {
        case .running, .paused:
            state = .finishing
            return true
        case .initial, .canceling, .finishing, .completed:
            return false
        }
    }

    enum FinishAction: Sendable, Equatable {
        /// Complete the task: `nil` is success.
        case complete(FerryError?)
        case none
    }

    /// The transfer ended, successfully (`nil`) or with `error`.
    mutating func transferFinished(error: FerryError?) -> FinishAction {
        switch state {
        case .canceling(let reason):
            state = .completed
            return .complete(reason)
        case .running, .paused, .finishing:
            state = .completed
            return .complete(error)
        case .initial, .completed:
            return .none
        }
    }
}
