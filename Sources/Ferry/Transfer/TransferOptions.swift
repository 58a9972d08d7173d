import Foundation

/// What a transfer uses of its task's settings, copied under the task's lock once, when the
/// transfer starts (at ``SessionTask/resume()``): the transfer never reads the task's lock
/// for them while it runs, and a setting changed after `resume()` does not change a
/// transfer halfway (as URLSession documents for its tasks' properties).
struct TransferOptions: Sendable {
    /// The key of the download in the session's resume store: the task's ``SessionTask/resumeKey``,
    /// else its URL.
    let resumeKey: String
    /// Whether the download continues the store's entry for its key.
    let resumesFromStore: Bool
    /// The digest the downloaded file must have.
    let checksum: Checksum?
    /// The task's retry policy, or the session's.
    let retryPolicy: RetryPolicy
    /// The task's resumable-upload policy, or the session's.
    let resumableUploads: ResumableUploadPolicy
    /// What an upload task made from resume data continues
    /// (`uploadTask(withResumeData:)`); `nil` for any other task.
    let uploadResume: UploadResumeData?
    /// The task's redirect policy, or the session's.
    let redirectPolicy: RedirectPolicy
    /// Connections a download may use: the task's `maximumConnections`, or the session's.
    let connections: Int
    /// The task's priority among tasks waiting for a connection slot.
    let priority: Float
    /// The request's own `timeoutInterval` when it was set (anything but Foundation's
    /// default of 60 s), else the configuration's `timeoutIntervalForRequest`: as with
    /// URLSession, one request may have a shorter or longer idle timeout than its session.
    let idleTimeout: TimeInterval
    /// Where ``idleTimeout`` comes from, for the timeout's message.
    let idleTimeoutSource: String

    /// `URLRequest(url:)`'s `timeoutInterval`.
    static let foundationDefaultTimeout: TimeInterval = 60

    init(task: SessionTask, configuration: SessionConfiguration) {
        let settings = task.storage.withLock {
            (
                $0.resumeKey, $0.resumesFromStore, $0.checksum, $0.retryPolicy, $0.redirectPolicy,
                $0.maximumConnections, $0.priority, $0.resumableUploads, $0.uploadResume
            )
        }
        resumeKey = settings.0 ?? task.originalRequest.url?.absoluteString ?? "\(task.taskIdentifier)"
        resumesFromStore = settings.1
        checksum = settings.2
        retryPolicy = settings.3 ?? configuration.retryPolicy
        redirectPolicy = settings.4 ?? configuration.redirectPolicy
        connections = max(1, settings.5 ?? configuration.maximumConnectionsPerDownload)
        priority = settings.6
        resumableUploads = settings.7 ?? configuration.resumableUploads
        uploadResume = settings.8
        let requested = task.originalRequest.timeoutInterval
        let own = requested > 0 && requested != Self.foundationDefaultTimeout
        idleTimeout = own ? requested : configuration.timeoutIntervalForRequest
        idleTimeoutSource = own ? "the request's timeoutInterval" : "timeoutIntervalForRequest"
    }
}
