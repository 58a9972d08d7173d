import Foundation

/// The resumable upload's loop as a value: what an upload to a server that speaks
/// draft-ietf-httpbis-resumable-upload does next, from finding out whether the server speaks
/// it to the final response. No I/O: ``Uploader`` performs each action and reports back.
///
/// The upload is "careful" in the draft's words (section "Careful Upload Creation"): the
/// client asks the target with `OPTIONS` whether it offers resumption (a server that does
/// answers with `Upload-Limit`), creates the upload resource with an empty request
/// (`Upload-Complete: ?0`), and sends the representation in `PATCH` requests
/// (`application/partial-upload`) from the offset the server holds. A client that cannot see
/// the interim `104 (Upload Resumption Supported)` response (AsyncHTTPClient drops every
/// 1xx) learns the upload resource's URL this way before a byte of the body is at risk.
///
/// ## Interop versions
/// The draft is not final; a client names the version it speaks in
/// `Upload-Draft-Interop-Version`. The machine asks in the order of
/// ``Configuration/versions`` (8, the current draft's, then 6, what Apple's
/// `NIOResumableUpload` and URLSession speak): a server that answers `400` naming another
/// version it knows is asked in that one next; a server that ignores a version is asked in
/// the next. A server that answers none gets an ordinary upload.
///
/// ## Events and actions
/// - ``start()`` — the first action: probe, or an ordinary upload.
/// - ``answered(_:)`` — a response to the action last returned.
/// - ``failed(_:sentUpTo:cancelled:)`` — the action's exchange failed (no response, or a
///   transient status the request loop gave up on).
/// - ``waited()`` — the wait of ``Action/wait(attempt:delay:after:)`` is over.
///
/// ## tus 1.0
/// With ``Configuration/tus``, the same loop speaks tus: `OPTIONS` must name version 1.0.0
/// and the creation extension (the version in actions is then 1), the creation is tus's
/// `POST` with `Upload-Length`, `HEAD` and `PATCH` carry `Tus-Resumable`, and the upload is
/// complete when the server's offset reaches the length: that answer is delivered.
///
/// ## Guarantees
/// - Bytes the server acknowledged are never sent again; an offset beyond what was sent, or
///   below one acknowledged before, fails the upload (and cancels the upload resource).
/// - The upload resource must be on the target's origin; otherwise the upload fails and
///   nothing (no credential, no byte) is sent there.
/// - Retries after failures spend one ``RetryBudget``, renewed whenever the server's offset
///   advances; `409` answers and restarts after a vanished resource are bounded too.
struct ResumableUploadStateMachine: Sendable {
    /// What the machine needs to know of the upload, copied when it starts.
    struct Configuration: Sendable, Equatable {
        /// The representation's length, `nil` when unknown (a stream).
        var length: Int64?
        /// Whether the body can be produced again from its start (then a vanished upload
        /// resource is created again).
        var replayable: Bool
        /// Interop versions, in the order they are tried.
        var versions: [Int] = [8, 6]
        /// The IETF draft, or tus 1.0.
        var tus = false
        /// tus: a body of at most this many bytes goes with the creation request, when the
        /// server offers creation-with-upload. Larger ones are created empty first: a creation
        /// cut before its answer leaves no upload resource to continue.
        var creationWithUploadLimit: Int64 = 4 << 20
        /// tus: with the checksum extension, each append carries at most this many bytes,
        /// each with its `Upload-Checksum` (the digest is computed before the bytes go).
        var checksummedAppendSize: Int64 = 8 << 20
        /// Most `409 (Conflict)` answers in a row before the upload fails.
        var maximumConflicts = 3
        /// Most times a vanished upload resource is created again.
        var maximumRestarts = 2

        /// The version actions name for tus 1.0.0.
        static let tusVersion = 1
    }

    /// An answer to the action last returned.
    struct Answer: Sendable, Equatable {
        var status: Int
        var fields: UploadFields
        /// `Location`, resolved against the request's URL.
        var location: URL?

        init(status: Int, fields: UploadFields = UploadFields(), location: URL? = nil) {
            self.status = status
            self.fields = fields
            self.location = location
        }
    }

    /// What the owner does next.
    enum Action: Sendable, Equatable {
        /// `OPTIONS` to the target with `Upload-Draft-Interop-Version: version`.
        case probe(version: Int)
        /// The target's request (its method and fields) with `Upload-Complete: ?0`,
        /// `Upload-Length` when known, and no content.
        case create(version: Int, length: Int64?)
        /// The target's request as it is, with the whole body: the server does not offer
        /// resumption. Its answer is the task's.
        case sendPlain
        /// tus creation-with-upload: the creation request carries the whole body.
        case createWithBody(version: Int)
        /// `HEAD` to the upload resource.
        case retrieveOffset(URL, version: Int)
        /// `PATCH` to the upload resource with `Upload-Offset: offset`, the body's bytes from
        /// `offset` (`count` of them, or the rest when `nil`) and `Upload-Complete: complete`.
        case append(URL, version: Int, offset: Int64, count: Int64?, complete: Bool)
        /// Announce the retry, wait `delay` seconds, then report ``waited()``.
        case wait(attempt: Int, delay: TimeInterval, after: FerryError)
        /// The answer just reported is the task's response: consume its body as the task's.
        case deliver
        /// `DELETE` to the upload resource (bounded, its answer ignored), then fail with the
        /// error.
        case cancel(URL, version: Int, then: FerryError)
        /// The upload fails with this error.
        case fail(FerryError)
    }

    /// Where the upload is.
    enum Phase: Sendable, Equatable {
        case idle
        case probing(version: Int)
        case creating(version: Int)
        case plain
        case retrieving
        case appending(offset: Int64, count: Int64?, complete: Bool)
        case waiting(then: Action)
        case done
    }

    /// What the machine and the server agreed on, as the upload begins.
    struct Negotiation: Sendable, Equatable {
        /// Interop versions asked so far.
        var tried: [Int] = []
        /// tus: the server offers creation-with-upload.
        var tusCreationWithUpload = false
        /// tus: the checksum algorithm every append's `Upload-Checksum` uses (`sha256` or
        /// `sha1`), when the server offers the checksum extension with one of them.
        var checksumAlgorithm: Checksum.Algorithm?
        /// The creation in flight carries the body.
        var creationCarriesBody = false
    }

    let configuration: Configuration
    private(set) var phase = Phase.idle
    /// The upload resource, once created.
    private(set) var resource: URL?
    /// The interop version the server speaks, once known.
    private(set) var version: Int?
    /// The server's limits, from its latest answer that had them.
    private(set) var limits: UploadLimits?
    /// The highest offset the server acknowledged.
    private(set) var acknowledged: Int64 = 0
    /// The furthest byte ever handed to a connection.
    private(set) var sent: Int64 = 0
    private(set) var retry: RetryBudget
    private var conflicts = 0
    /// What the server was asked and offered.
    private(set) var negotiated = Negotiation()
    private var restarts = 0
    /// The target's URL: the upload resource must be on its origin.
    let target: URL

    init(target: URL, configuration: Configuration, retry: RetryBudget) {
        self.target = target
        self.configuration = configuration
        self.retry = retry
    }

    /// The first action: ask the server whether it offers resumption.
    mutating func start() -> Action {
        if configuration.tus { return probe(Configuration.tusVersion) }
        guard let first = configuration.versions.first else { return enter(.plain, .sendPlain) }
        return probe(first)
    }

    /// The first action of an upload whose resource exists already (resume data): ask for
    /// its offset.
    mutating func resume(resource: URL, version: Int, acknowledged: Int64, sent: Int64) -> Action {
        self.resource = resource
        self.version = version
        self.acknowledged = acknowledged
        self.sent = max(sent, acknowledged)
        return enter(.retrieving, .retrieveOffset(resource, version: version))
    }

    // MARK: Answers

    /// The answer to the action last returned; `sentUpTo` is the furthest byte of the body
    /// the exchange handed to the connection.
    mutating func answered(_ answer: Answer, sentUpTo: Int64) -> Action {
        sent = max(sent, sentUpTo)
        if let limits = answer.fields.limits { self.limits = limits }
        if let named = answer.fields.interopVersion, let version, named != version {
            switch phase {
            case .creating, .retrieving, .appending:
                return fail(
                    .badServerResponse,
                    "The server answered in interop version \(named) an upload it began in version \(version)."
                )
            default: break
            }
        }
        switch phase {
        case .probing(let version): return probed(answer, version: version)
        case .creating(let version): return created(answer, version: version)
        case .plain: return enter(.done, .deliver)
        case .retrieving: return retrieved(answer)
        case .appending(let offset, let count, let complete):
            return appended(answer, offset: offset, count: count, complete: complete)
        case .idle, .waiting, .done:
            return fail(.badServerResponse, "An answer came when no request of the upload was out.")
        }
    }

    private mutating func probed(_ answer: Answer, version: Int) -> Action {
        let fields = answer.fields
        if configuration.tus { return probedTus(answer) }
        if (200..<300).contains(answer.status), let limits = fields.limits,
            fields.interopVersion == nil || fields.interopVersion == version
        {
            self.version = version
            if let length = configuration.length {
                if let minimum = limits.minimumSize, length < minimum { return enter(.plain, .sendPlain) }
                if let maximum = limits.maximumSize, length > maximum { return enter(.plain, .sendPlain) }
            }
            return creation(version)
        }
        // Apple's server answers 400 naming the version it speaks; a server that knows only
        // another version ignores this one.
        var next: Int?
        if answer.status == 400, let named = fields.interopVersion, configuration.versions.contains(named),
            !negotiated.tried.contains(named)
        {
            next = named
        } else {
            next = configuration.versions.first { !negotiated.tried.contains($0) }
        }
        guard let next else { return enter(.plain, .sendPlain) }
        return probe(next)
    }

    private mutating func probe(_ version: Int) -> Action {
        if !negotiated.tried.contains(version) { negotiated.tried.append(version) }
        return enter(.probing(version: version), .probe(version: version))
    }

    private mutating func probedTus(_ answer: Answer) -> Action {
        let fields = answer.fields
        guard (200..<300).contains(answer.status), fields.tusVersions.contains("1.0.0") else {
            return fail(
                .badServerResponse,
                "The server did not answer OPTIONS as a tus 1.0.0 server (HTTP \(answer.status), Tus-Version: \(fields.tusVersions.joined(separator: ", ")))."
            )
        }
        guard fields.tusExtensions.contains("creation") else {
            return fail(.unsupportedConfiguration, "The tus server does not offer the creation extension.")
        }
        if let maximum = fields.tusMaximumSize, let length = configuration.length, length > maximum {
            return fail(.bodyTooLarge(limit: maximum), "The tus server takes uploads of at most \(maximum) bytes.")
        }
        version = Configuration.tusVersion
        negotiated.tusCreationWithUpload = fields.tusExtensions.contains("creation-with-upload")
        if fields.tusExtensions.contains("checksum") {
            negotiated.checksumAlgorithm = [Checksum.Algorithm.sha256, .sha1].first {
                fields.tusChecksumAlgorithms.contains($0.rawValue)
            }
        }
        return creation(Configuration.tusVersion)
    }

    /// The creation request: with the body (tus creation-with-upload, a small body), or
    /// empty.
    private mutating func creation(_ version: Int) -> Action {
        negotiated.creationCarriesBody =
            configuration.tus && negotiated.tusCreationWithUpload
            && (configuration.length ?? .max) <= configuration.creationWithUploadLimit
        if negotiated.creationCarriesBody {
            return enter(.creating(version: version), .createWithBody(version: version))
        }
        return enter(.creating(version: version), .create(version: version, length: configuration.length))
    }

    private mutating func created(_ answer: Answer, version: Int) -> Action {
        if RetryPolicy.retriedStatuses.contains(answer.status) {
            return failed(FerryError.uploadAnswered(answer.status), sentUpTo: sent, cancelled: false)
        }
        guard (200..<300).contains(answer.status) else { return enter(.done, .deliver) }
        guard let location = answer.location, answer.fields.complete != true else {
            return fail(
                .badServerResponse,
                "The server offered resumable uploads but answered the upload's creation without an upload resource."
            )
        }
        guard Origin(location) == Origin(target) else {
            return fail(
                .badServerResponse,
                "The upload resource \(location.absoluteString) is on another origin than \(target.absoluteString); nothing is sent there."
            )
        }
        resource = location
        // Limits that came with the resource and rule the body out: give the resource up.
        if let maximum = limits?.maximumSize, let length = configuration.length, length > maximum {
            return cancel(
                .badServerResponse,
                "The upload resource takes at most \(maximum) bytes; the body has \(length)."
            )
        }
        if negotiated.creationCarriesBody {
            let offset = answer.fields.offset ?? 0
            if let refusal = refusal(of: offset) { return refusal }
            if offset == configuration.length {
                acknowledged = offset
                return enter(.done, .deliver)
            }
            return nextAppend(from: offset)
        }
        if let offset = answer.fields.offset, offset != 0 {
            return cancel(.badServerResponse, "The server holds \(offset) bytes of an upload it just created.")
        }
        return nextAppend(from: 0)
    }

    private mutating func retrieved(_ answer: Answer) -> Action {
        if answer.status == 404 || answer.status == 410 { return vanished(answer.status) }
        if RetryPolicy.retriedStatuses.contains(answer.status) {
            return failed(FerryError.uploadAnswered(answer.status), sentUpTo: sent, cancelled: false)
        }
        guard (200..<300).contains(answer.status) else {
            return fail(.unacceptableStatusCode(answer.status), "The upload resource answered HTTP \(answer.status).")
        }
        guard let offset = answer.fields.offset else {
            return fail(.badServerResponse, "The upload resource did not say its offset (Upload-Offset).")
        }
        if let refusal = refusal(of: offset) { return refusal }
        if configuration.tus, offset == configuration.length {
            // Every byte is there: the answer is the upload's last.
            acknowledged = offset
            return enter(.done, .deliver)
        }
        if answer.fields.complete == true {
            // Complete: only the final response was lost. Appending nothing asks the
            // server to repeat it.
            return enter(
                .appending(offset: offset, count: 0, complete: true),
                .append(resource ?? target, version: version ?? 0, offset: offset, count: 0, complete: true)
            )
        }
        return nextAppend(from: offset)
    }

    private mutating func appended(_ answer: Answer, offset: Int64, count: Int64?, complete: Bool) -> Action {
        let fields = answer.fields
        if configuration.tus { return appendedTus(answer, offset: offset) }
        if fields.complete == true { return enter(.done, .deliver) }
        // Some servers (Apple's, interop version 6) leave `Upload-Complete` out of the final
        // response: a success to the request that completed the upload is that response.
        if complete, fields.complete == nil, (200..<300).contains(answer.status) { return enter(.done, .deliver) }
        switch answer.status {
        case 200..<300:
            guard !complete else {
                // The server says the complete body did not complete the upload: ask how far it got.
                return conflicted(at: fields.offset, reason: "did not complete the upload it got whole")
            }
            let end = offset + (count ?? 0)
            let now = fields.offset ?? end
            if let refusal = refusal(of: now) { return refusal }
            return nextAppend(from: now)
        case 409:
            return conflicted(at: fields.offset, reason: "answered 409 (Conflict)")
        default:
            return appendAnswered(otherwise: answer.status)
        }
    }

    /// An append's answer that is neither a success nor a conflict: the resource vanished,
    /// a transient status to wait out, or the target's own answer.
    private mutating func appendAnswered(otherwise status: Int) -> Action {
        switch status {
        case 404, 410: vanished(status)
        case let transient where RetryPolicy.retriedStatuses.contains(transient):
            failed(FerryError.uploadAnswered(transient), sentUpTo: sent, cancelled: false)
        default: enter(.done, .deliver)
        }
    }

    /// A tus `PATCH`'s answer: `204` with the new offset; the upload is complete when it
    /// reaches the length.
    private mutating func appendedTus(_ answer: Answer, offset: Int64) -> Action {
        switch answer.status {
        case 200..<300:
            guard let now = answer.fields.offset else {
                return fail(.badServerResponse, "The tus server did not say the new offset (Upload-Offset).")
            }
            if let refusal = refusal(of: now) { return refusal }
            if now == configuration.length {
                acknowledged = now
                return enter(.done, .deliver)
            }
            return nextAppend(from: now)
        case 409:
            return conflicted(at: nil, reason: "answered 409 (Conflict)")
        case 460 where negotiated.checksumAlgorithm != nil:
            // The bytes arrived other than they left: sent again from the server's offset.
            return conflicted(at: nil, reason: "found the checksum of an append wrong (460)")
        default:
            return appendAnswered(otherwise: answer.status)
        }
    }

    // MARK: Failures

    /// The exchange of the action last returned failed; `sentUpTo` is the furthest byte of
    /// the body handed to the connection.
    mutating func failed(_ error: FerryError, sentUpTo: Int64, cancelled: Bool) -> Action {
        sent = max(sent, sentUpTo)
        let recovery: Action
        switch phase {
        case .probing(let version): recovery = .probe(version: version)
        case .creating(let version):
            recovery =
                negotiated.creationCarriesBody
                ? .createWithBody(version: version) : .create(version: version, length: configuration.length)
        case .retrieving, .appending:
            guard let resource, let version else { return enter(.done, .fail(error)) }
            recovery = .retrieveOffset(resource, version: version)
        case .plain, .idle, .waiting, .done:
            return enter(.done, .fail(error))
        }
        switch retry.decide(after: error, cancelled: cancelled) {
        case .retry(let attempt, let delay):
            return enter(.waiting(then: recovery), .wait(attempt: attempt, delay: delay, after: error))
        case .giveUp:
            return enter(.done, .fail(error))
        }
    }

    /// The exchange in flight handed the body up to `offset` to its connection, and ends
    /// without an event the loop acts on (the task was cancelled): an offset the server
    /// names later is judged against it.
    mutating func handed(upTo offset: Int64) { sent = max(sent, offset) }

    /// The wait is over: the action it deferred.
    mutating func waited() -> Action {
        guard case .waiting(let then) = phase else {
            return fail(.badServerResponse, "A wait ended when the upload was not waiting.")
        }
        switch then {
        case .probe(let version): phase = .probing(version: version)
        case .create(let version, _), .createWithBody(let version): phase = .creating(version: version)
        case .retrieveOffset: phase = .retrieving
        default: return fail(.badServerResponse, "The upload waited for an action it cannot take.")
        }
        return then
    }

    // MARK: Steps

    /// The next `PATCH` from `offset`, within `max-append-size`.
    private mutating func nextAppend(from offset: Int64) -> Action {
        guard let resource, let version else { return fail(.badServerResponse, "The upload has no resource.") }
        if offset > acknowledged {
            acknowledged = offset
            conflicts = 0
            retry = RetryBudget(policy: retry.policy)
        }
        var count: Int64?
        var complete = true
        if let length = configuration.length {
            let rest = length - offset
            count = rest
            if let maximum = limits?.maximumAppendSize, maximum > 0, rest > maximum {
                count = maximum
                complete = false
            }
            if negotiated.checksumAlgorithm != nil, rest > configuration.checksummedAppendSize {
                count = configuration.checksummedAppendSize
            }
        }
        return enter(
            .appending(offset: offset, count: count, complete: complete),
            .append(resource, version: version, offset: offset, count: count, complete: complete)
        )
    }

    /// A `409` or an append the server did not take whole: append again from the offset it
    /// names, or ask for it.
    private mutating func conflicted(at offset: Int64?, reason: String) -> Action {
        conflicts += 1
        guard conflicts <= configuration.maximumConflicts else {
            return cancel(.badServerResponse, "The upload resource \(reason) \(conflicts) times in a row.")
        }
        guard let offset else {
            guard let resource, let version else { return fail(.badServerResponse, "The upload has no resource.") }
            return enter(.retrieving, .retrieveOffset(resource, version: version))
        }
        if let refusal = refusal(of: offset) { return refusal }
        return nextAppend(from: offset)
    }

    /// The upload resource is gone: create it again when the body can start over.
    private mutating func vanished(_ status: Int) -> Action {
        guard configuration.replayable, let version else {
            return fail(
                .badServerResponse,
                "The upload resource is gone (HTTP \(status)) and the body cannot be sent again from its start."
            )
        }
        guard restarts < configuration.maximumRestarts else {
            return fail(
                .badServerResponse,
                "The upload resource is gone (HTTP \(status)) again, after \(restarts) new ones."
            )
        }
        restarts += 1
        resource = nil
        acknowledged = 0
        return creation(version)
    }

    /// Why `offset` cannot be continued from, or `nil` when it can.
    private mutating func refusal(of offset: Int64) -> Action? {
        if offset < acknowledged {
            return cancel(
                .badServerResponse,
                "The upload resource's offset went back from \(acknowledged) to \(offset) bytes."
            )
        }
        if offset > sent, offset > acknowledged {
            return cancel(
                .badServerResponse,
                "The upload resource claims \(offset) bytes; only \(sent) were sent."
            )
        }
        if let length = configuration.length, offset > length {
            return cancel(.badServerResponse, "The upload resource claims \(offset) bytes of a \(length)-byte body.")
        }
        return nil
    }

    private mutating func cancel(_ reason: FerryError.Reason, _ message: String) -> Action {
        let error = FerryError(reason, message)
        guard let resource, let version else { return enter(.done, .fail(error)) }
        return enter(.done, .cancel(resource, version: version, then: error))
    }

    private mutating func fail(_ reason: FerryError.Reason, _ message: String) -> Action {
        enter(.done, .fail(FerryError(reason, message)))
    }

    private mutating func enter(_ phase: Phase, _ action: Action) -> Action {
        self.phase = phase
        return action
    }
}

extension FerryError {
    /// A status the upload's request loop gave up on, for the machine's retry budget.
    static func uploadAnswered(_ status: Int) -> FerryError {
        FerryError(.unacceptableStatusCode(status), "The server answered HTTP \(status) during the upload.")
    }
}
