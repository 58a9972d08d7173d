import Foundation
import NIOCore
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An upload task's transfer through the resumable-upload protocol: performs what
/// ``ResumableUploadStateMachine`` decides — `OPTIONS`, the creation, `HEAD`, `PATCH`,
/// waits and `DELETE` — each through the request loop (redirects, credentials, cookies, the
/// interceptor), and delivers the final response as an upload task's.
struct Uploader: TransferPart {
    let transfer: Transfer

    /// Whether an upload of `body` with `request` asks the server for resumption: the
    /// session's policy allows it, the body can be produced again, and it is not small.
    static func applies(to request: URLRequest, body: RequestBody, policy: ResumableUploadPolicy) -> Bool {
        guard policy.isEnabled else { return false }
        // A tus upload goes to the tus server whatever the body; the upload says what it lacks.
        if case .tus = policy.uploadProtocol { return true }
        guard body.isReplayable else { return false }
        switch request.method {
        case .post, .put, .patch: break
        default: return false
        }
        return (body.length ?? .max) >= policy.minimumSize
    }

    /// What one exchange came to.
    private enum Reply: Sendable {
        case next(ResumableUploadStateMachine.Action)
        case finished(TaskOutcome)
    }

    func upload(_ request: URLRequest, body: RequestBody) async throws -> TaskOutcome {
        guard let target = request.url else { throw FerryError(.invalidURL, "The request has no URL.") }
        let resume = resumption(of: request, body: body)
        var metadata: [String: String]?
        if case .tus(let given) = options.resumableUploads.uploadProtocol { metadata = given }
        let tus = resume.map { $0.uploadProtocol == UploadResumeData.tus } ?? (metadata != nil)
        if tus { try Self.checkTus(body: body, metadata: metadata ?? [:]) }
        var machine = ResumableUploadStateMachine(
            target: target,
            configuration: .init(length: body.length, replayable: body.isReplayable, tus: tus),
            retry: RetryBudget(policy: options.retryPolicy)
        )
        var checkpoint = Checkpoint(uploader: self, request: request, body: body)
        let ask = { (url: URL, method: String, version: Int) in
            protocolRequest(request, to: url, method: method, version: version, tus: tus)
        }
        var action: ResumableUploadStateMachine.Action
        if let resume {
            logger.debug("upload resumes", metadata: ["resource": "\(resume.uploadURL.absoluteString)"])
            checkpoint.expiresAt = resume.expiresAt
            action = machine.resume(
                resource: resume.uploadURL,
                version: resume.interopVersion,
                acknowledged: resume.bytesAcknowledged,
                sent: resume.bytesSent
            )
        } else {
            action = machine.start()
        }
        // Where the next append starts when nothing went wrong; `nil` after the offset was
        // asked for. An append elsewhere continues an interrupted upload: the task hears so.
        var expectedOffset: Int64? = 0
        do {
            while true {
                checkpoint.note(machine)
                let reply: Reply
                switch action {
                case .probe(let version):
                    var probe = ask(target, "OPTIONS", version)
                    // tus: every request but OPTIONS names the version.
                    if tus { probe.setValue(nil, forHTTPHeaderField: UploadFields.Name.tusResumable) }
                    reply = try await exchange(probe, body: nil, sentFrom: 0, machine: &machine)
                case .create(let version, _) where tus:
                    let creation = tusCreation(ask(target, "POST", version), body: body, metadata: metadata)
                    reply = try await exchange(creation, body: .data(Data()), sentFrom: 0, machine: &machine)
                case .createWithBody(let version):
                    var creation = tusCreation(ask(target, "POST", version), body: body, metadata: metadata)
                    creation.setValue("application/offset+octet-stream", forHTTPHeaderField: "Content-Type")
                    if let algorithm = machine.negotiated.checksumAlgorithm {
                        let digest = try await Self.checksum(body.chunks(), algorithm: algorithm)
                        creation.setValue(digest, forHTTPHeaderField: UploadFields.Name.uploadChecksum)
                    }
                    task.client.resetSentBytes(to: 0)
                    reply = try await exchange(creation, body: body, sentFrom: 0, machine: &machine)
                case .create(let version, let length):
                    var creation = request
                    creation.httpBody = nil
                    creation.httpBodyStream = nil
                    creation.setValue("\(version)", forHTTPHeaderField: UploadFields.Name.interopVersion)
                    creation.setValue(UploadFields.serialize(false), forHTTPHeaderField: UploadFields.Name.complete)
                    creation.setValue(length.map { "\($0)" }, forHTTPHeaderField: UploadFields.Name.length)
                    reply = try await exchange(creation, body: .data(Data()), sentFrom: 0, machine: &machine)
                case .sendPlain:
                    reply = try await exchange(request, body: body, sentFrom: 0, machine: &machine)
                case .retrieveOffset(let resource, let version):
                    expectedOffset = nil
                    let head = ask(resource, "HEAD", version)
                    reply = try await exchange(head, body: nil, sentFrom: 0, machine: &machine)
                case .append(let resource, let version, let offset, let count, let complete):
                    var patch = ask(resource, "PATCH", version)
                    patch.setValue(
                        tus ? "application/offset+octet-stream" : "application/partial-upload",
                        forHTTPHeaderField: "Content-Type"
                    )
                    patch.setValue("\(offset)", forHTTPHeaderField: UploadFields.Name.offset)
                    if !tus {
                        patch.setValue(UploadFields.serialize(complete), forHTTPHeaderField: UploadFields.Name.complete)
                    }
                    if offset != expectedOffset {
                        task.client.publish(.resumedAtOffset(offset, expectedTotalBytes: body.length))
                        logger.debug("upload continues", metadata: ["offset": "\(offset)"])
                    }
                    expectedOffset = count.map { offset + $0 }
                    // Kept before the bytes go: after a crash the server may hold any of them.
                    checkpoint.note(machine, sendingUpTo: count.map { offset + $0 } ?? .max)
                    task.client.resetSentBytes(to: offset)
                    let part = RequestBody.provided(body.chunks(from: offset, count: count), length: count)
                    if let algorithm = machine.negotiated.checksumAlgorithm {
                        let digest = try await Self.checksum(part.chunks(), algorithm: algorithm)
                        patch.setValue(digest, forHTTPHeaderField: UploadFields.Name.uploadChecksum)
                    }
                    reply = try await exchange(patch, body: part, sentFrom: offset, machine: &machine)
                case .wait(let attempt, let delay, let error):
                    try await transfer.waitToRetry(attempt: attempt, delay: delay, after: error)
                    reply = .next(machine.waited())
                case .cancel(let resource, let version, let error):
                    await discard(ask(resource, "DELETE", version))
                    checkpoint.forget()
                    throw error
                case .fail(let error):
                    throw error
                case .deliver:
                    throw FerryError(.badServerResponse, "The upload's answer was delivered out of turn.")
                }
                switch reply {
                case .finished(let outcome):
                    if let resource = machine.resource { task.storage.withLock { $0.uploadURL = resource } }
                    checkpoint.forget()
                    return outcome
                case .next(let next): action = next
                }
            }
        } catch {
            var failure = transfer.ferryError(from: error)
            guard failure.uploadResumeData == nil, let resource = machine.resource, let version = machine.version
            else { throw failure }
            // A task its owner cancelled gives the upload resource up, unless it asked for
            // resume data; a failure keeps it, for the server's lifetime of it.
            if failure.reason == .cancelled, !task.client.producesResumeData {
                await discard(ask(resource, "DELETE", version))
                checkpoint.forget()
                throw failure
            }
            checkpoint.note(machine)
            failure.uploadResumeData = checkpoint.resumeData
            throw failure
        }
    }

    /// What continues this upload: the task's resume data, or the session's store entry for
    /// its key when the task resumes from the store (an entry it does not continue is
    /// forgotten), or `nil` for a new upload. Resume data past its `max-age` is not used.
    private func resumption(of request: URLRequest, body: RequestBody) -> UploadResumeData? {
        let store = configuration.resumeStore
        var resume = options.uploadResume
        if resume == nil, let store, let kept = store.uploadResumeData(for: options.resumeKey) {
            if options.resumesFromStore, kept.targetURL == request.url, kept.totalLength == body.length {
                resume = kept
            } else {
                store.removeUpload(options.resumeKey)
            }
        }
        guard let resume, (resume.expiresAt ?? .distantFuture) > Date() else { return nil }
        return resume
    }

    /// The upload's resume data as it stands, kept in the session's resume store (when it
    /// has one) whenever the server acknowledged more, from the moment the upload resource
    /// exists: a crash loses at most what the server has not acknowledged.
    private struct Checkpoint {
        let uploader: Uploader
        let request: URLRequest
        let body: RequestBody
        var resumeData: UploadResumeData?
        var expiresAt: Date?

        init(uploader: Uploader, request: URLRequest, body: RequestBody) {
            self.uploader = uploader
            self.request = request
            self.body = body
        }

        /// Notes where the upload stands; `sendingUpTo` bounds the bytes of the append about
        /// to go.
        mutating func note(_ machine: ResumableUploadStateMachine, sendingUpTo: Int64 = 0) {
            guard let resource = machine.resource, let version = machine.version else { return }
            if let age = machine.limits?.maximumAge { expiresAt = Date().addingTimeInterval(TimeInterval(age)) }
            var source: URL?
            if case .file(let url, _) = body { source = url }
            let current = UploadResumeData(
                tus: machine.configuration.tus,
                interopVersion: version,
                request: request,
                uploadURL: resource,
                bytesAcknowledged: machine.acknowledged,
                bytesSent: max(machine.sent, sendingUpTo),
                totalLength: body.length,
                sourceFile: source,
                expiresAt: expiresAt,
                createdAt: resumeData?.createdAt ?? Date()
            )
            let moved =
                current.uploadURL != resumeData?.uploadURL || current.bytesAcknowledged != resumeData?.bytesAcknowledged
                || current.bytesSent != resumeData?.bytesSent
            resumeData = current
            if moved { uploader.task.storage.withLock { $0.uploadURL = resource } }
            guard moved, let store = uploader.configuration.resumeStore else { return }
            do {
                try store.save(current, for: uploader.options.resumeKey)
            } catch {
                uploader.logger.warning("cannot keep the upload's resume data", metadata: ["error": "\(error)"])
            }
        }

        mutating func forget() {
            resumeData = nil
            uploader.configuration.resumeStore?.removeUpload(uploader.options.resumeKey)
        }
    }

    /// Sends `request` and reports its answer (or failure) to the machine; a final answer
    /// is consumed as the upload task's response.
    private func exchange(
        _ request: URLRequest,
        body: RequestBody?,
        sentFrom offset: Int64,
        machine: inout ResumableUploadStateMachine
    ) async throws -> Reply {
        // What the exchange handed on: the request loop sends the body again after a 401 or a
        // 307 / 308, so each sending counts from 0 and the furthest of them is what the
        // server can hold (sendings never add up: the second repeats the first's bytes).
        let handed = Handed()
        let counted = body.map { body in
            RequestBody.provided(
                ByteChunks {
                    handed.sending.store(0, ordering: .relaxed)
                    var base = body.chunks().makeAsyncIterator()
                    return ByteChunks.Iterator {
                        let chunk = try await base.next()
                        if let chunk { handed.add(Int64(chunk.readableBytes)) }
                        return chunk
                    }
                },
                length: body.length
            )
        }
        let transfer = self.transfer
        /// A failure of the exchange, as the machine takes it (a cancellation ends the upload).
        func failed(_ error: any Error) throws -> Reply {
            let failure = transfer.ferryError(from: error)
            let sent = offset + handed.furthest.load(ordering: .relaxed)
            if Task.isCancelled || failure.reason == .cancelled {
                machine.handed(upTo: sent)
                throw error
            }
            return .next(machine.failed(failure, sentUpTo: sent, cancelled: false))
        }
        let response: FinalResponse
        do {
            response = try await transfer.open(request, body: counted, sentFrom: offset)
        } catch {
            return try failed(error)
        }
        let head = response.head
        let location = head.headers["Location"].flatMap { URL(string: $0, relativeTo: head.url)?.absoluteURL }
        let answer = ResumableUploadStateMachine.Answer(
            status: head.statusCode,
            fields: UploadFields(head.headers),
            location: location
        )
        let next = machine.answered(answer, sentUpTo: offset + handed.furthest.load(ordering: .relaxed))
        guard case .deliver = next else {
            await response.body.drain()
            response.close()
            return .next(next)
        }
        do {
            return .finished(
                try await response.read { body, head in
                    try await DataLoad(transfer: transfer).consumeInMemory(body, head: head)
                }
            )
        } catch {
            return try failed(error)
        }
    }

    /// How much of an exchange's body its sendings handed to the connection: the one going
    /// on, and the furthest any of them came. One sending at a time adds to it.
    private final class Handed: Sendable {
        let sending = Atomic<Int64>(0)
        let furthest = Atomic<Int64>(0)

        func add(_ count: Int64) {
            let now = sending.add(count, ordering: .relaxed).newValue
            furthest.max(now, ordering: .relaxed)
        }
    }

    /// A request of the protocol to `url`: the original request's fields (its credentials
    /// and cookies: the upload resource is on its origin) without its representation's, and
    /// the protocol's version (`Upload-Draft-Interop-Version`, or tus's `Tus-Resumable`).
    private func protocolRequest(
        _ original: URLRequest,
        to url: URL,
        method: String,
        version: Int,
        tus: Bool
    ) -> URLRequest {
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in original.allHTTPHeaderFields ?? [:]
        where !name.lowercased().hasPrefix("content-") && name.lowercased() != "transfer-encoding" {
            request.setValue(value, forHTTPHeaderField: name)
        }
        if tus {
            request.setValue("1.0.0", forHTTPHeaderField: UploadFields.Name.tusResumable)
        } else {
            request.setValue("\(version)", forHTTPHeaderField: UploadFields.Name.interopVersion)
        }
        return request
    }

    /// tus's `Upload-Checksum` value for `chunks`: the algorithm's name and the base64 digest.
    private static func checksum(_ chunks: ByteChunks, algorithm: Checksum.Algorithm) async throws -> String {
        "\(algorithm.rawValue) \(try await algorithm.digest(of: chunks).base64EncodedString())"
    }

    /// tus's creation request: `Upload-Length` and `Upload-Metadata` added to `request`.
    private func tusCreation(_ request: URLRequest, body: RequestBody, metadata: [String: String]?) -> URLRequest {
        var creation = request
        creation.setValue(body.length.map { "\($0)" }, forHTTPHeaderField: UploadFields.Name.length)
        creation.setValue(
            UploadFields.tusMetadata(metadata ?? [:]),
            forHTTPHeaderField: UploadFields.Name.uploadMetadata
        )
        return creation
    }

    /// What a tus upload needs: a body of known length that can be read again, and metadata
    /// keys tus can carry (ASCII, no space or comma).
    private static func checkTus(body: RequestBody, metadata: [String: String]) throws(FerryError) {
        guard body.length != nil, body.isReplayable else {
            throw FerryError(
                .unsupportedConfiguration,
                "A tus upload needs a body of known length that can be read again (data, a file, a body provider)."
            )
        }
        for key in metadata.keys
        where key.isEmpty || !key.allSatisfy({ $0.isASCII && $0 != " " && $0 != "," && !$0.isNewline }) {
            throw FerryError(.invalidRequest, "The tus metadata key '\(key)' is not ASCII without spaces or commas.")
        }
    }

    /// `DELETE` to the upload resource, given at most five seconds, its answer ignored; it
    /// runs even when the task was cancelled.
    private func discard(_ deletion: URLRequest) async {
        let resource = deletion.url?.absoluteString ?? ""
        let transfer = self.transfer
        let attempt = Task {
            if let exchange = try? await transfer.exchange(deletion, body: nil) { await exchange.body.drain() }
        }
        let deadline = Task {
            try? await Task.sleep(for: .seconds(5))
            attempt.cancel()
        }
        await attempt.value
        deadline.cancel()
        logger.debug("upload resource cancelled", metadata: ["url": "\(resource)"])
    }
}
