public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What a data task does with its response, as URLSession's `ResponseDisposition`.
public enum ResponseDisposition: Sendable, Equatable {
    /// Go on reading the body.
    case allow
    /// Cancel the task; it completes with ``FerryError/Reason/cancelledByDelegate``.
    case cancel
    /// Write the body to a file instead: a ``DownloadTask`` takes over.
    case becomeDownload
}

/// Receives a session's events, one at a time, in the order they happened.
///
/// Shaped like `URLSessionDelegate` and its task / data / download sub-protocols, merged into
/// one protocol whose methods all have default implementations: implement only what you need.
/// Each method takes the task type it is about (`dataTask: DataTask` — upload tasks are data
/// tasks —, `downloadTask: DownloadTask`, `task: SessionTask` for every kind), so a method
/// meant for data tasks cannot be written for the wrong kind. A method whose signature is
/// almost a requirement's is a warning in the conforming type ("nearly matches defaulted
/// requirement"): read it, since such a method is never called.
///
/// ## Requirements that changed
/// A requirement whose shape changed stays as a deprecated requirement, and the new one's
/// default calls it: a delegate written against an earlier Ferry keeps being called. The
/// data task's response decision, its data and its cache decision once took
/// `task: SessionTask` / `dataTask: SessionTask`; those forms are still honoured.
///
/// ## Lifecycle and threading
/// The session holds its delegate strongly until it is invalidated, then calls
/// ``session(_:didBecomeInvalidWithError:)`` last and lets it go. Calls never overlap:
/// they come one after another from one serial delivery context, per task in event order
/// and across tasks in the order events happened. The `async` methods are decisions: the
/// task waits for their answer. Do not block in a method; hand long work elsewhere.
public protocol SessionDelegate: AnyObject, Sendable {
    /// A data or upload task's final response arrived; answer whether to read the body
    /// (URLSession's `urlSession(_:dataTask:didReceive:completionHandler:)`).
    func session(
        _ session: Session,
        dataTask: DataTask,
        didReceive response: HTTPResponse
    ) async
        -> ResponseDisposition
    /// A redirect is about to be followed; return the request to send, or `nil` to stop and
    /// complete with the 3xx response.
    func session(
        _ session: Session,
        task: SessionTask,
        willPerformRedirection response: HTTPResponse,
        newRequest: URLRequest
    ) async -> URLRequest?
    /// A server asked for credentials (`401` with `WWW-Authenticate`); answer how to respond.
    /// Asked again, with a higher ``AuthenticationChallenge/previousFailureCount``, when the
    /// credentials sent were refused. The default performs the session's default handling.
    func session(
        _ session: Session,
        task: SessionTask,
        didReceive challenge: AuthenticationChallenge
    ) async -> ChallengeDisposition
    /// A server's certificate chain, before its connection is used (only with
    /// ``TLSOptions/delegateEvaluatesServerTrust``); answer whether to trust it. The default
    /// keeps the session's own verdict.
    func session(_ session: Session, didReceive challenge: ServerTrustChallenge) async -> ServerTrustDisposition
    /// What the task's requests took; called once, just before its completion.
    func session(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics)
    /// An interim (1xx) response arrived before the final one, such as `103 Early Hints`
    /// (``TaskEvent/informationalResponse(_:)``), as URLSession's delegate hears it. The
    /// default does nothing.
    func session(_ session: Session, task: SessionTask, didReceiveInformationalResponse response: HTTPResponse)
    /// A data task's response is about to be stored in the session's ``ResponseCache``;
    /// return it (changed or not) to store, or `nil` to store nothing.
    func session(
        _ session: Session,
        dataTask: DataTask,
        willCacheResponse proposedResponse: CachedResponse
    ) async -> CachedResponse?
    /// Body bytes arrived for a data or upload task.
    func session(_ session: Session, dataTask: DataTask, didReceive data: Data)
    /// Request body bytes were sent.
    func session(
        _ session: Session,
        task: SessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64?
    )
    /// Body bytes were written to a download's partial file.
    func session(
        _ session: Session,
        downloadTask: DownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64?
    )
    /// A resumed download continues at `fileOffset` (0 when the bytes on disk could not be
    /// reused). Like `urlSession(_:downloadTask:didResumeAtOffset:expectedTotalBytes:)`.
    func session(
        _ session: Session,
        downloadTask: DownloadTask,
        didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64?
    )
    /// A download is complete at `location`. When the task has no destination, move the file
    /// during this call: it is removed afterwards, as URLSession does.
    func session(_ session: Session, downloadTask: DownloadTask, didFinishDownloadingTo location: URL)
    /// A data task became a download task.
    func session(_ session: Session, dataTask: DataTask, didBecome downloadTask: DownloadTask)
    /// A data task's `Upgrade` (answered `101`) or `CONNECT` (answered `2xx`) left HTTP: its
    /// connection continues as `streamTask`, already running (URLSession's
    /// `urlSession(_:dataTask:didBecome:)` for stream tasks).
    func session(_ session: Session, dataTask: DataTask, didBecome streamTask: StreamTask)
    /// A task completed; `nil` is success. Called exactly once per task.
    func session(_ session: Session, task: SessionTask, didCompleteWithError error: FerryError?)
    /// The session was invalidated. The last call the delegate gets.
    func session(_ session: Session, didBecomeInvalidWithError error: FerryError?)
    /// A background session has delivered the events of its tasks that happened while no
    /// process was attached (completions, files, failures); called once per attachment,
    /// after them.
    func sessionDidFinishEvents(forBackgroundSession session: Session)

    // MARK: Earlier shapes, still called

    /// The response decision as Ferry 0.x declared it, given a ``SessionTask``; still called
    /// when the `dataTask: DataTask` form is not implemented.
    @available(*, deprecated, renamed: "session(_:dataTask:didReceive:)")
    func session(_ session: Session, task: SessionTask, didReceive response: HTTPResponse) async -> ResponseDisposition
    /// The cache decision as Ferry 0.x declared it, given a ``SessionTask``; still called
    /// when the `dataTask: DataTask` form is not implemented.
    @available(*, deprecated, renamed: "session(_:dataTask:willCacheResponse:)")
    func session(
        _ session: Session,
        dataTask: SessionTask,
        willCacheResponse proposedResponse: CachedResponse
    ) async -> CachedResponse?
    /// Body bytes as Ferry 0.x declared them, given a ``SessionTask``; still called when
    /// the `dataTask: DataTask` form is not implemented.
    @available(*, deprecated, renamed: "session(_:dataTask:didReceive:)")
    func session(_ session: Session, dataTask: SessionTask, didReceive data: Data)
}

extension SessionDelegate {
    public func session(
        _ session: Session,
        dataTask: DataTask,
        didReceive response: HTTPResponse
    )
        async -> ResponseDisposition
    { await EarlierShapes.calls.responseDecision(self, session, dataTask, response) }
    public func session(
        _ session: Session,
        task: SessionTask,
        willPerformRedirection response: HTTPResponse,
        newRequest: URLRequest
    ) async -> URLRequest? { newRequest }
    public func session(
        _ session: Session,
        task: SessionTask,
        didReceive challenge: AuthenticationChallenge
    ) async -> ChallengeDisposition { .performDefaultHandling }
    public func session(_ session: Session, task: SessionTask, didFinishCollecting metrics: TaskMetrics) {}
    public func session(
        _ session: Session,
        task: SessionTask,
        didReceiveInformationalResponse response: HTTPResponse
    ) {}
    public func session(
        _ session: Session,
        didReceive challenge: ServerTrustChallenge
    ) async -> ServerTrustDisposition {
        .performDefaultHandling
    }
    public func session(
        _ session: Session,
        dataTask: DataTask,
        willCacheResponse proposedResponse: CachedResponse
    ) async -> CachedResponse? { await EarlierShapes.calls.cacheDecision(self, session, dataTask, proposedResponse) }
    public func session(_ session: Session, dataTask: DataTask, didReceive data: Data) {
        EarlierShapes.calls.data(self, session, dataTask, data)
    }
    /// Allows the body: the default of the earlier shape.
    @available(*, deprecated, renamed: "session(_:dataTask:didReceive:)")
    public func session(
        _ session: Session,
        task: SessionTask,
        didReceive response: HTTPResponse
    ) async -> ResponseDisposition { .allow }
    /// Stores the proposed response unchanged: the default of the earlier shape.
    @available(*, deprecated, renamed: "session(_:dataTask:willCacheResponse:)")
    public func session(
        _ session: Session,
        dataTask: SessionTask,
        willCacheResponse proposedResponse: CachedResponse
    ) async -> CachedResponse? { proposedResponse }
    /// Does nothing: the default of the earlier shape.
    @available(*, deprecated, renamed: "session(_:dataTask:didReceive:)")
    public func session(_ session: Session, dataTask: SessionTask, didReceive data: Data) {}
    public func session(
        _ session: Session,
        task: SessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64?
    ) {}
    public func session(
        _ session: Session,
        downloadTask: DownloadTask,
        didWriteData bytesWritten: Int64,
        totalBytesWritten: Int64,
        totalBytesExpectedToWrite: Int64?
    ) {}
    public func session(
        _ session: Session,
        downloadTask: DownloadTask,
        didResumeAtOffset fileOffset: Int64,
        expectedTotalBytes: Int64?
    ) {}
    public func session(_ session: Session, downloadTask: DownloadTask, didFinishDownloadingTo location: URL) {}
    public func session(_ session: Session, dataTask: DataTask, didBecome downloadTask: DownloadTask) {}
    public func session(_ session: Session, dataTask: DataTask, didBecome streamTask: StreamTask) {}
    public func session(_ session: Session, task: SessionTask, didCompleteWithError error: FerryError?) {}
    public func session(_ session: Session, didBecomeInvalidWithError error: FerryError?) {}
    public func sessionDidFinishEvents(forBackgroundSession session: Session) {}
}

/// Calls the deprecated requirements from the new ones' defaults.
///
/// The calls sit in deprecated witnesses of a protocol that is not deprecated, so the
/// library itself compiles without a deprecation warning while a delegate's method of an
/// earlier shape is still found by dynamic dispatch.
private protocol EarlierShapeCalls: Sendable {
    func responseDecision(
        _ delegate: any SessionDelegate,
        _ session: Session,
        _ task: DataTask,
        _ response: HTTPResponse
    ) async -> ResponseDisposition
    func cacheDecision(
        _ delegate: any SessionDelegate,
        _ session: Session,
        _ task: DataTask,
        _ proposed: CachedResponse
    ) async -> CachedResponse?
    func data(_ delegate: any SessionDelegate, _ session: Session, _ task: DataTask, _ data: Data)
}

private struct EarlierShapes: EarlierShapeCalls {
    static let calls: any EarlierShapeCalls = EarlierShapes()

    @available(*, deprecated, message: "calls a deprecated requirement")
    func responseDecision(
        _ delegate: any SessionDelegate,
        _ session: Session,
        _ task: DataTask,
        _ response: HTTPResponse
    ) async -> ResponseDisposition {
        await delegate.session(session, task: task as SessionTask, didReceive: response)
    }

    @available(*, deprecated, message: "calls a deprecated requirement")
    func cacheDecision(
        _ delegate: any SessionDelegate,
        _ session: Session,
        _ task: DataTask,
        _ proposed: CachedResponse
    ) async -> CachedResponse? {
        await delegate.session(session, dataTask: task as SessionTask, willCacheResponse: proposed)
    }

    @available(*, deprecated, message: "calls a deprecated requirement")
    func data(_ delegate: any SessionDelegate, _ session: Session, _ task: DataTask, _ data: Data) {
        delegate.session(session, dataTask: task as SessionTask, didReceive: data)
    }
}
