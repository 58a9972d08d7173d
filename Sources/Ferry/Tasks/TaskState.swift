/// Where a task is in its lifecycle, as URLSession names it.
///
/// `suspended → running ⇄ suspended → canceling → completed`. A new task is `suspended`
/// until its first `resume()`; a task waiting for a free connection is `running`.
public enum TaskState: Sendable, Equatable {
    /// Started, or transferring.
    case running
    /// Made, or suspended: not transferring.
    case suspended
    /// Cancelled; the completion is on its way.
    case canceling
    /// Ended: with its result, an error, or cancelled.
    case completed
}
