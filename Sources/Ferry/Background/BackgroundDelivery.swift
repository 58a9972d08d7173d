/// The bookkeeping of a background session's link, as a value: whether the session has
/// attached, which daemon task each event goes to, when the event feed may go on, and which
/// progress is new.
///
/// No I/O happens here and nothing is awaited: ``BackgroundLink`` owns one behind its lock,
/// calls it for each thing that happens and performs the returned action (resuming a
/// continuation, acknowledging an event). `Wakeup` is what a parked party is resumed by
/// (`CheckedContinuation<Void, Never>` in the link; anything in the unit tests).
///
/// Parties:
/// - the **feed** reads the daemon's events in order and offers each; it waits until the
///   event's task consumed it (so the event is acknowledged only once delivered), or until
///   the submissions in flight say whose event it is;
/// - each **transfer** waits for its task's one event;
/// - **callers** wait until the tasks of a previous process are attached.
struct BackgroundDelivery<Wakeup> {
    enum Attachment: Equatable {
        case pending
        /// Attaching ended, with the error that stopped it if any.
        case done(FerryError?)
        case closed
    }

    private(set) var attachment = Attachment.pending
    private var attachWaiters: [Wakeup] = []
    /// Daemon task ids this process knows (reattached or submitted).
    private var known: Set<Int64> = []
    /// Known tasks that completed here (cancelled): their event needs no delivery.
    private var finished: Set<Int64> = []
    /// Submissions whose id is not known yet.
    private var submitting = 0
    /// The feed, waiting for a submission to end before it offers an event again.
    private var feedAwaitingSubmission: Wakeup?
    /// Events offered before (or while) their transfer waited, by task id.
    private var ready: [Int64: BackgroundEventRecord] = [:]
    /// Transfers waiting for their event, by task id.
    private var transfers: [Int64: Wakeup] = [:]
    /// The feed, waiting until the task of the event it offered has consumed it.
    private var feedAwaitingConsumption: [Int64: Wakeup] = [:]
    /// The bytes last reported for each task.
    private var reported: [Int64: Int64] = [:]

    // MARK: Attaching

    /// A caller wants to wait until attaching ended. Returns `waiter` when it must not wait.
    mutating func waitForAttachment(_ waiter: Wakeup) -> Wakeup? {
        guard attachment == .pending else { return waiter }
        attachWaiters.append(waiter)
        return nil
    }

    /// Attaching ended; returns the callers to wake.
    mutating func attached(error: FerryError?) -> [Wakeup] {
        if attachment == .pending { attachment = .done(error) }
        defer { attachWaiters = [] }
        return attachWaiters
    }

    /// Why attaching failed, if it did.
    var attachError: FerryError? {
        if case .done(let error) = attachment { error } else { nil }
    }

    /// The session was invalidated; returns everybody to wake.
    mutating func close() -> [Wakeup] {
        attachment = .closed
        var woken = attachWaiters
        attachWaiters = []
        if let feed = feedAwaitingSubmission { woken.append(feed) }
        feedAwaitingSubmission = nil
        return woken
    }

    // MARK: Tasks

    /// A task of a previous process was made again in this one.
    mutating func reattached(_ id: Int64) {
        known.insert(id)
    }

    /// A task is being handed to the daemon; its id is not known yet.
    mutating func submissionStarted() {
        submitting += 1
    }

    /// A submission ended (`id` is the daemon's id, `nil` if it failed). Returns the feed to
    /// wake if it waited for submissions to end.
    mutating func submissionEnded(id: Int64?) -> Wakeup? {
        submitting -= 1
        if let id { known.insert(id) }
        defer { feedAwaitingSubmission = nil }
        return feedAwaitingSubmission
    }

    // MARK: Events

    enum OfferAction {
        /// Not this process's task, or one that already completed here: acknowledge it.
        case skip
        /// A submission in flight may be this event's task: the feed waits (it is woken by
        /// ``submissionEnded(id:)``) and offers the event again.
        case waitForSubmission
        /// The event is the task's: the feed waits until the task consumed it (woken by
        /// ``transferEnded(_:)``), after waking the transfer if it was already waiting.
        case deliver(wake: Wakeup?)
    }

    /// The feed offers `event`; `feed` wakes it, kept when it must wait.
    mutating func offer(_ event: BackgroundEventRecord, feed: Wakeup) -> OfferAction {
        let id = event.taskId
        if !known.contains(id) && submitting > 0 {
            feedAwaitingSubmission = feed
            return .waitForSubmission
        }
        guard known.contains(id), !finished.contains(id) else { return .skip }
        feedAwaitingConsumption[id] = feed
        ready[id] = event
        return .deliver(wake: transfers.removeValue(forKey: id))
    }

    enum WaitAction {
        /// The event is here already: ``takeEvent(of:)`` returns it.
        case ready
        /// The transfer waits; ``offer(_:feed:)`` or ``stopWaiting(_:)`` wakes it.
        case wait
        /// The transfer was cancelled before it waited.
        case cancelled
    }

    /// Task `id`'s transfer wants its event; `waiter` wakes it, kept when it must wait.
    mutating func waitForEvent(of id: Int64, waiter: Wakeup, cancelled: Bool) -> WaitAction {
        if ready[id] != nil { return .ready }
        if cancelled { return .cancelled }
        transfers[id] = waiter
        return .wait
    }

    /// A woken transfer takes its event: `nil` when it was woken by its cancellation.
    mutating func takeEvent(of id: Int64) -> BackgroundEventRecord? {
        ready.removeValue(forKey: id)
    }

    /// Task `id`'s transfer was cancelled while waiting: returns its waiter to wake.
    mutating func stopWaiting(_ id: Int64) -> Wakeup? {
        transfers.removeValue(forKey: id)
    }

    /// Task `id`'s transfer ended (its event consumed, or cancelled here): returns the feed
    /// to wake if it waited for this task.
    mutating func transferEnded(_ id: Int64) -> Wakeup? {
        finished.insert(id)
        reported[id] = nil
        ready[id] = nil
        return feedAwaitingConsumption.removeValue(forKey: id)
    }

    // MARK: Progress

    /// The daemon reports `bytes` for task `id`: whether that is news.
    mutating func report(_ bytes: Int64, for id: Int64) -> Bool {
        defer { reported[id] = bytes }
        return reported[id] != bytes
    }
}
