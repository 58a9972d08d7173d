/// Where a task is in its lifecycle, as URLSession names it.
///
/// `suspended → running ⇄ suspended → canceling → completed`. A new task is `suspended`
/// until its first `resume()`; a task waiting for a free connection is `running`.
public enum TaskState: Sendable, Equatable {
    case running
    case suspended
    case canceling
    case completed
}
