/// When the daemon applies its retention after tasks end: a decision with no I/O.
///
/// The retention goes over every finished task of the store, which one end must not pay
/// each time (the daemon at a million tasks). It runs once enough ends came since it last
/// ran, an eighth of the finished tasks the retention keeps and at most ``maximumEnds``
/// (`--keep-finished 2`: at every end), or once ``interval`` passed: the store keeps at
/// most an eighth more finished tasks than the retention says meanwhile.
struct PruneSchedule: Sendable {
    /// Most ends between two prunings.
    static let maximumEnds = 256
    /// Most time between two prunings, when tasks end.
    static let interval: Duration = .seconds(60)

    /// Finished tasks the retention keeps (``BackgroundStore/Retention/maximumFinishedTasks``).
    let keeps: Int
    private(set) var endsSincePrune = 0
    private(set) var lastPrune: ContinuousClock.Instant
    /// Whether the retention's batches are being run: a pruning asked meanwhile starts no
    /// other run.
    var batchesRunning = false

    init(keeps: Int, now: ContinuousClock.Instant = .now) {
        self.keeps = keeps
        self.lastPrune = now
    }

    /// Ends between two prunings at most, for this retention.
    var ends: Int { min(Self.maximumEnds, max(1, keeps / 8)) }

    /// A task ended at `now`: whether to prune now.
    mutating func taskEnded(now: ContinuousClock.Instant = .now) -> Bool {
        endsSincePrune += 1
        return endsSincePrune >= ends || now - lastPrune >= Self.interval
    }

    /// The retention was applied at `now`.
    mutating func pruned(now: ContinuousClock.Instant = .now) {
        endsSincePrune = 0
        lastPrune = now
    }
}
