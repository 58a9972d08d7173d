import Foundation
import Testing

@testable import Ferry

/// Every answer and failure of the resumable upload's loop, in each phase that can receive
/// it: what it decides, with no I/O (ResumableUploadTests runs the same loop against Apple's
/// server).
@Suite("ResumableUploadStateMachine")
struct ResumableUploadStateMachineTests {
    typealias Machine = ResumableUploadStateMachine
    typealias Answer = Machine.Answer

    let target = URL(string: "http://h.test/files/a")!
    let resource = URL(string: "http://h.test/uploads/1")!
    let noDelay = RetryPolicy(maximumRetries: 2, baseDelay: 0, maximumDelay: 0)

    func machine(length: Int64? = 1000, replayable: Bool = true, retries: Int = 2) -> Machine {
        Machine(
            target: target,
            configuration: .init(length: length, replayable: replayable),
            retry: RetryBudget(policy: RetryPolicy(maximumRetries: retries, baseDelay: 0, maximumDelay: 0))
        )
    }

    func supported(_ limits: UploadLimits = UploadLimits(minimumSize: 0), version: Int? = nil) -> Answer {
        Answer(status: 200, fields: UploadFields(limits: limits, interopVersion: version))
    }

    func created(at location: URL? = nil, offset: Int64? = 0) -> Answer {
        Answer(status: 201, fields: UploadFields(offset: offset, complete: false), location: location ?? resource)
    }

    /// A machine that has created its resource and is appending the whole body from 0.
    func appending(length: Int64? = 1000, limits: UploadLimits = UploadLimits(minimumSize: 0)) -> Machine {
        var machine = machine(length: length)
        _ = machine.start()
        _ = machine.answered(supported(limits), sentUpTo: 0)
        _ = machine.answered(created(), sentUpTo: 0)
        return machine
    }

    var network: FerryError { FerryError(.network, "reset") }

    func isFailure(_ action: Machine.Action, _ reason: FerryError.Reason) -> Bool {
        if case .fail(let error) = action { return error.reason == reason }
        return false
    }

    func isCancel(_ action: Machine.Action, version: Int = 8) -> Bool {
        if case .cancel(let url, let named, let error) = action {
            return url == resource && named == version && error.reason == .badServerResponse
        }
        return false
    }

    // MARK: Finding out what the server speaks

    @Test func startsByAskingInTheCurrentDraftsVersion() {
        var machine = machine()
        #expect(machine.start() == .probe(version: 8))
    }

    @Test func aServerAnsweringWithLimitsIsAskedToCreateTheUploadResource() {
        var machine = machine()
        _ = machine.start()
        #expect(machine.answered(supported(), sentUpTo: 0) == .create(version: 8, length: 1000))
        #expect(machine.version == 8)
    }

    @Test func aBadRequestNamingVersion6IsAskedInVersion6() {
        var machine = machine()
        _ = machine.start()
        let refused = Answer(status: 400, fields: UploadFields(interopVersion: 6))
        #expect(machine.answered(refused, sentUpTo: 0) == .probe(version: 6))
        #expect(machine.answered(supported(), sentUpTo: 0) == .create(version: 6, length: 1000))
        #expect(machine.version == 6)
    }

    @Test func aServerIgnoringVersion8IsAskedInVersion6ThenGetsAnOrdinaryUpload() {
        var machine = machine()
        _ = machine.start()
        #expect(machine.answered(Answer(status: 204), sentUpTo: 0) == .probe(version: 6))
        #expect(machine.answered(Answer(status: 405), sentUpTo: 0) == .sendPlain)
        #expect(machine.answered(Answer(status: 201), sentUpTo: 0) == .deliver)
    }

    @Test func aBadRequestNamingAVersionAlreadyTriedIsNotAskedAgain() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(Answer(status: 204), sentUpTo: 0)
        let refused = Answer(status: 400, fields: UploadFields(interopVersion: 8))
        #expect(machine.answered(refused, sentUpTo: 0) == .sendPlain)
    }

    @Test func limitsInAnotherVersionsAnswerDoNotCount() {
        var machine = machine()
        _ = machine.start()
        #expect(machine.answered(supported(version: 6), sentUpTo: 0) == .probe(version: 6))
    }

    @Test func aBodyOutsideTheSizeLimitsGetsAnOrdinaryUpload() {
        var small = machine(length: 10)
        _ = small.start()
        #expect(small.answered(supported(UploadLimits(minimumSize: 100)), sentUpTo: 0) == .sendPlain)
        var large = machine(length: 10_000)
        _ = large.start()
        #expect(large.answered(supported(UploadLimits(maximumSize: 100)), sentUpTo: 0) == .sendPlain)
    }

    @Test func aProbeThatFailsIsTriedAgainWithinTheBudget() {
        var machine = machine(retries: 1)
        _ = machine.start()
        #expect(machine.failed(network, sentUpTo: 0, cancelled: false) == .wait(attempt: 1, delay: 0, after: network))
        #expect(machine.waited() == .probe(version: 8))
        #expect(isFailure(machine.failed(network, sentUpTo: 0, cancelled: false), .network))
    }

    @Test func aVersion6ProbeTriedAgainStillFallsBackToAnOrdinaryUpload() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(Answer(status: 204), sentUpTo: 0)
        _ = machine.failed(network, sentUpTo: 0, cancelled: false)
        #expect(machine.waited() == .probe(version: 6))
        #expect(machine.answered(Answer(status: 204), sentUpTo: 0) == .sendPlain)
    }

    // MARK: Creating the upload resource

    @Test func theCreatedResourceIsAppendedToFromZero() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        #expect(
            machine.answered(created(), sentUpTo: 0)
                == .append(resource, version: 8, offset: 0, count: 1000, complete: true)
        )
        #expect(machine.resource == resource)
    }

    @Test func aResourceOnAnotherOriginIsRefusedAndNothingIsSentThere() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        let elsewhere = URL(string: "http://other.test/uploads/1")!
        #expect(isFailure(machine.answered(created(at: elsewhere), sentUpTo: 0), .badServerResponse))
        #expect(machine.resource == nil)
    }

    @Test func aCreationAnsweredWithoutAResourceFails() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        #expect(isFailure(machine.answered(Answer(status: 200), sentUpTo: 0), .badServerResponse))
    }

    @Test func aCreationRefusedWithAClientErrorIsTheAnswer() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        #expect(machine.answered(Answer(status: 403), sentUpTo: 0) == .deliver)
    }

    @Test func aCreationThatFailsOrMeetsATransientStatusIsSentAgain() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        guard case .wait = machine.answered(Answer(status: 503), sentUpTo: 0) else {
            Issue.record("a 503 is waited out")
            return
        }
        #expect(machine.waited() == .create(version: 8, length: 1000))
        _ = machine.failed(network, sentUpTo: 0, cancelled: false)
        #expect(machine.waited() == .create(version: 8, length: 1000))
    }

    @Test func aFreshResourceHoldingBytesIsCancelled() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        #expect(isCancel(machine.answered(created(offset: 10), sentUpTo: 0)))
    }

    @Test func aResourceCreatedWithASizeLimitTheBodyExceedsIsCancelled() {
        var machine = machine()
        _ = machine.start()
        _ = machine.answered(supported(), sentUpTo: 0)
        var created = created()
        created.fields.limits = UploadLimits(maximumSize: 999)
        #expect(isCancel(machine.answered(created, sentUpTo: 0)))
    }

    @Test func theAppendSizeLimitSplitsTheBodyIntoAppends() {
        var machine = appending(limits: UploadLimits(maximumAppendSize: 400))
        let acknowledged = Answer(status: 204, fields: UploadFields(offset: 400, complete: false))
        #expect(
            machine.answered(acknowledged, sentUpTo: 400)
                == .append(resource, version: 8, offset: 400, count: 400, complete: false)
        )
        let next = Answer(status: 204, fields: UploadFields(complete: false))
        #expect(
            machine.answered(next, sentUpTo: 800)
                == .append(resource, version: 8, offset: 800, count: 200, complete: true)
        )
    }

    // MARK: Appending and resuming

    @Test func theFinalResponseIsDelivered() {
        var machine = appending()
        #expect(machine.answered(Answer(status: 201, fields: UploadFields(complete: true)), sentUpTo: 1000) == .deliver)
    }

    @Test func aSuccessWithoutUploadCompleteToTheCompletingAppendIsTheFinalResponse() {
        var machine = appending()
        #expect(machine.answered(Answer(status: 201), sentUpTo: 1000) == .deliver)
    }

    @Test func anErrorFromTheTargetAfterCompletionIsDelivered() {
        var machine = appending()
        #expect(machine.answered(Answer(status: 422, fields: UploadFields(complete: true)), sentUpTo: 1000) == .deliver)
    }

    @Test func aDroppedConnectionAsksForTheOffsetAndContinuesFromIt() {
        var machine = appending()
        #expect(machine.failed(network, sentUpTo: 600, cancelled: false) == .wait(attempt: 1, delay: 0, after: network))
        #expect(machine.waited() == .retrieveOffset(resource, version: 8))
        let offset = Answer(status: 204, fields: UploadFields(offset: 450, complete: false))
        #expect(
            machine.answered(offset, sentUpTo: 0)
                == .append(resource, version: 8, offset: 450, count: 550, complete: true)
        )
        #expect(machine.acknowledged == 450)
    }

    @Test func progressRenewsTheRetryBudget() {
        var machine = appending()
        for offset in stride(from: Int64(100), through: 900, by: 100) {
            guard case .wait = machine.failed(network, sentUpTo: offset + 50, cancelled: false) else {
                Issue.record("the failure at \(offset) is retried: the server's offset advanced")
                return
            }
            _ = machine.waited()
            let answer = Answer(status: 204, fields: UploadFields(offset: offset, complete: false))
            #expect(
                machine.answered(answer, sentUpTo: 0)
                    == .append(resource, version: 8, offset: offset, count: 1000 - offset, complete: true)
            )
        }
    }

    @Test func failuresWithoutProgressSpendTheBudget() {
        var machine = appending()
        for _ in 0..<2 {
            _ = machine.failed(network, sentUpTo: 100, cancelled: false)
            _ = machine.waited()
            _ = machine.answered(Answer(status: 204, fields: UploadFields(offset: 0, complete: false)), sentUpTo: 0)
        }
        #expect(isFailure(machine.failed(network, sentUpTo: 100, cancelled: false), .network))
    }

    @Test func aCancelledExchangeIsNotRetried() {
        var machine = appending()
        let cancelled = FerryError(.cancelled, "cancelled")
        #expect(isFailure(machine.failed(cancelled, sentUpTo: 100, cancelled: true), .cancelled))
    }

    @Test func anOffsetBeyondWhatWasSentIsRefused() {
        var machine = appending()
        _ = machine.failed(network, sentUpTo: 300, cancelled: false)
        _ = machine.waited()
        let claim = Answer(status: 204, fields: UploadFields(offset: 500, complete: false))
        #expect(isCancel(machine.answered(claim, sentUpTo: 0)))
    }

    @Test func anOffsetGoingBackwardsIsRefused() {
        var machine = appending()
        _ = machine.failed(network, sentUpTo: 600, cancelled: false)
        _ = machine.waited()
        _ = machine.answered(Answer(status: 204, fields: UploadFields(offset: 500, complete: false)), sentUpTo: 0)
        _ = machine.failed(network, sentUpTo: 700, cancelled: false)
        _ = machine.waited()
        let back = Answer(status: 204, fields: UploadFields(offset: 200, complete: false))
        #expect(isCancel(machine.answered(back, sentUpTo: 0)))
    }

    @Test func theWholeBodyHeldButNotCompleteIsCompletedWithAnEmptyAppend() {
        var machine = appending(length: 100)
        _ = machine.failed(network, sentUpTo: 100, cancelled: false)
        _ = machine.waited()
        let answer = Answer(status: 204, fields: UploadFields(offset: 100, complete: false))
        #expect(
            machine.answered(answer, sentUpTo: 0)
                == .append(resource, version: 8, offset: 100, count: 0, complete: true)
        )
    }

    @Test func anOffsetRetrievalWithoutAnOffsetFails() {
        var machine = appending()
        _ = machine.failed(network, sentUpTo: 300, cancelled: false)
        _ = machine.waited()
        #expect(isFailure(machine.answered(Answer(status: 204), sentUpTo: 0), .badServerResponse))
    }

    @Test func aConflictContinuesFromTheServersOffset() {
        var machine = appending()
        let conflict = Answer(status: 409, fields: UploadFields(offset: 0, complete: false))
        #expect(
            machine.answered(conflict, sentUpTo: 0)
                == .append(resource, version: 8, offset: 0, count: 1000, complete: true)
        )
    }

    @Test func aConflictLoopEnds() {
        var machine = appending()
        let conflict = Answer(status: 409, fields: UploadFields(offset: 0, complete: false))
        for _ in 0..<3 { _ = machine.answered(conflict, sentUpTo: 0) }
        #expect(isCancel(machine.answered(conflict, sentUpTo: 0)))
    }

    @Test func aConflictWithoutAnOffsetAsksForIt() {
        var machine = appending()
        #expect(machine.answered(Answer(status: 409), sentUpTo: 0) == .retrieveOffset(resource, version: 8))
    }

    @Test func aVanishedResourceIsCreatedAgainWhenTheBodyCanStartOver() {
        var machine = appending()
        _ = machine.failed(network, sentUpTo: 300, cancelled: false)
        _ = machine.waited()
        #expect(machine.answered(Answer(status: 404), sentUpTo: 0) == .create(version: 8, length: 1000))
        #expect(machine.resource == nil)
        #expect(
            machine.answered(created(), sentUpTo: 0)
                == .append(resource, version: 8, offset: 0, count: 1000, complete: true)
        )
    }

    @Test func aVanishedResourceFailsAStreamAndEndsAfterTheRestarts() {
        var stream = Machine(
            target: target,
            configuration: .init(length: 1000, replayable: false),
            retry: RetryBudget(policy: noDelay)
        )
        _ = stream.start()
        _ = stream.answered(supported(), sentUpTo: 0)
        _ = stream.answered(created(), sentUpTo: 0)
        #expect(isFailure(stream.answered(Answer(status: 410), sentUpTo: 0), .badServerResponse))

        var machine = appending()
        for _ in 0..<2 {
            _ = machine.answered(Answer(status: 404), sentUpTo: 0)
            _ = machine.answered(created(), sentUpTo: 0)
        }
        #expect(isFailure(machine.answered(Answer(status: 404), sentUpTo: 0), .badServerResponse))
    }

    @Test func aCompleteUploadWhoseAnswerWasLostIsAskedForItAgain() {
        var machine = appending()
        _ = machine.failed(network, sentUpTo: 1000, cancelled: false)
        _ = machine.waited()
        let done = Answer(status: 204, fields: UploadFields(offset: 1000, complete: true))
        #expect(
            machine.answered(done, sentUpTo: 0) == .append(resource, version: 8, offset: 1000, count: 0, complete: true)
        )
    }

    @Test func aServerErrorOnAnAppendAsksForTheOffset() {
        var machine = appending()
        guard case .wait = machine.answered(Answer(status: 502), sentUpTo: 500) else {
            Issue.record("a 502 is waited out")
            return
        }
        #expect(machine.waited() == .retrieveOffset(resource, version: 8))
    }

    @Test func aBodyOfUnknownLengthIsAppendedWhole() {
        var machine = appending(length: nil)
        _ = machine.failed(network, sentUpTo: 300, cancelled: false)
        _ = machine.waited()
        let offset = Answer(status: 204, fields: UploadFields(offset: 200, complete: false))
        #expect(
            machine.answered(offset, sentUpTo: 0)
                == .append(resource, version: 8, offset: 200, count: nil, complete: true)
        )
    }

    @Test func resumeDataStartsWithTheOffset() {
        var machine = machine()
        #expect(
            machine.resume(resource: resource, version: 6, acknowledged: 300, sent: 500)
                == .retrieveOffset(resource, version: 6)
        )
        let offset = Answer(status: 204, fields: UploadFields(offset: 500, complete: false))
        #expect(
            machine.answered(offset, sentUpTo: 0)
                == .append(resource, version: 6, offset: 500, count: 500, complete: true)
        )
        #expect(machine.acknowledged == 500)
        var again = self.machine()
        _ = again.resume(resource: resource, version: 6, acknowledged: 300, sent: 500)
        let back = Answer(status: 204, fields: UploadFields(offset: 200, complete: false))
        #expect(isCancel(again.answered(back, sentUpTo: 0), version: 6))
    }

    @Test func bytesHandedBeforeACancelBoundTheOffsetLater() {
        var machine = appending()
        machine.handed(upTo: 700)
        #expect(machine.sent == 700)
        _ = machine.failed(network, sentUpTo: 0, cancelled: false)
        _ = machine.waited()
        let offset = Answer(status: 204, fields: UploadFields(offset: 650, complete: false))
        #expect(
            machine.answered(offset, sentUpTo: 0)
                == .append(resource, version: 8, offset: 650, count: 350, complete: true)
        )
    }

    @Test func aServerThatChangesItsInteropVersionMidwayFails() {
        var machine = appending()
        let switched = Answer(status: 400, fields: UploadFields(interopVersion: 6))
        #expect(isFailure(machine.answered(switched, sentUpTo: 100), .badServerResponse))
    }

    // MARK: tus 1.0

    func tus(length: Int64? = 1000) -> Machine {
        Machine(
            target: target,
            configuration: .init(length: length, replayable: true, tus: true),
            retry: RetryBudget(policy: noDelay)
        )
    }

    func tusServer(_ extensions: [String] = ["creation", "termination"], maximum: Int64? = nil) -> Answer {
        Answer(
            status: 204,
            fields: UploadFields(tusVersions: ["1.0.0"], tusExtensions: extensions, tusMaximumSize: maximum)
        )
    }

    @Test func tusAsksOptionsThenCreatesThenAppendsToTheEnd() {
        var machine = tus()
        #expect(machine.start() == .probe(version: 1))
        #expect(machine.answered(tusServer(), sentUpTo: 0) == .create(version: 1, length: 1000))
        let created = Answer(status: 201, location: resource)
        #expect(
            machine.answered(created, sentUpTo: 0)
                == .append(resource, version: 1, offset: 0, count: 1000, complete: true)
        )
        let partial = Answer(status: 204, fields: UploadFields(offset: 600))
        #expect(
            machine.answered(partial, sentUpTo: 1000)
                == .append(resource, version: 1, offset: 600, count: 400, complete: true)
        )
        #expect(machine.answered(Answer(status: 204, fields: UploadFields(offset: 1000)), sentUpTo: 1000) == .deliver)
    }

    @Test func aSmallBodyGoesWithTheCreationWhenTheServerOffersIt() {
        var machine = tus()
        _ = machine.start()
        let offering = tusServer(["creation", "creation-with-upload"])
        #expect(machine.answered(offering, sentUpTo: 0) == .createWithBody(version: 1))
        let whole = Answer(status: 201, fields: UploadFields(offset: 1000), location: resource)
        #expect(machine.answered(whole, sentUpTo: 1000) == .deliver)
        #expect(machine.resource == resource)

        var cut = tus()
        _ = cut.start()
        _ = cut.answered(offering, sentUpTo: 0)
        #expect(cut.failed(network, sentUpTo: 400, cancelled: false) == .wait(attempt: 1, delay: 0, after: network))
        #expect(cut.waited() == .createWithBody(version: 1))
        let part = Answer(status: 201, fields: UploadFields(offset: 300), location: resource)
        #expect(
            cut.answered(part, sentUpTo: 1000) == .append(resource, version: 1, offset: 300, count: 700, complete: true)
        )

        var large = tus(length: 5 << 20)
        _ = large.start()
        #expect(large.answered(offering, sentUpTo: 0) == .create(version: 1, length: 5 << 20))
    }

    @Test func withTheChecksumExtensionAppendsAreCheckedPiecesAndA460SendsOneAgain() {
        var machine = Machine(
            target: target,
            configuration: .init(length: 20 << 20, replayable: true, tus: true),
            retry: RetryBudget(policy: noDelay)
        )
        _ = machine.start()
        let offering = Answer(
            status: 204,
            fields: UploadFields(
                tusVersions: ["1.0.0"],
                tusExtensions: ["creation", "checksum"],
                tusChecksumAlgorithms: ["md5", "sha1", "sha256"]
            )
        )
        _ = machine.answered(offering, sentUpTo: 0)
        #expect(machine.negotiated.checksumAlgorithm == .sha256)
        let created = Answer(status: 201, location: resource)
        #expect(
            machine.answered(created, sentUpTo: 0)
                == .append(resource, version: 1, offset: 0, count: 8 << 20, complete: true)
        )
        let refused = Answer(status: 460)
        #expect(machine.answered(refused, sentUpTo: 8 << 20) == .retrieveOffset(resource, version: 1))
        let offset = Answer(status: 200, fields: UploadFields(offset: 0))
        #expect(
            machine.answered(offset, sentUpTo: 0)
                == .append(resource, version: 1, offset: 0, count: 8 << 20, complete: true)
        )
    }

    @Test func aServerThatIsNotTusOrCannotCreateOrTakeTheSizeFails() {
        var plain = tus()
        _ = plain.start()
        #expect(isFailure(plain.answered(Answer(status: 200), sentUpTo: 0), .badServerResponse))
        var noCreation = tus()
        _ = noCreation.start()
        #expect(isFailure(noCreation.answered(tusServer(["termination"]), sentUpTo: 0), .unsupportedConfiguration))
        var small = tus()
        _ = small.start()
        #expect(isFailure(small.answered(tusServer(maximum: 10), sentUpTo: 0), .bodyTooLarge(limit: 10)))
    }

    @Test func aTusAppendWithoutAnOffsetOrPastTheBodyFails() {
        var machine = tus()
        _ = machine.start()
        _ = machine.answered(tusServer(), sentUpTo: 0)
        _ = machine.answered(Answer(status: 201, location: resource), sentUpTo: 0)
        #expect(isFailure(machine.answered(Answer(status: 204), sentUpTo: 1000), .badServerResponse))
        var past = tus()
        _ = past.start()
        _ = past.answered(tusServer(), sentUpTo: 0)
        _ = past.answered(Answer(status: 201, location: resource), sentUpTo: 0)
        let claim = Answer(status: 204, fields: UploadFields(offset: 900))
        guard case .cancel(_, 1, _) = past.answered(claim, sentUpTo: 500) else {
            Issue.record("an offset past what was sent cancels the tus upload")
            return
        }
    }

    @Test func aTusUploadWhoseLastAnswerWasLostIsCompleteAtItsLength() {
        var machine = tus()
        _ = machine.resume(resource: resource, version: 1, acknowledged: 0, sent: 1000)
        #expect(machine.answered(Answer(status: 200, fields: UploadFields(offset: 1000)), sentUpTo: 0) == .deliver)
        var conflict = tus()
        _ = conflict.resume(resource: resource, version: 1, acknowledged: 0, sent: 1000)
        _ = conflict.answered(Answer(status: 200, fields: UploadFields(offset: 100)), sentUpTo: 0)
        #expect(conflict.answered(Answer(status: 409), sentUpTo: 100) == .retrieveOffset(resource, version: 1))
    }

    @Test func anAnswerOrAWaitOutOfTurnFails() {
        var machine = machine()
        #expect(isFailure(machine.answered(Answer(status: 200), sentUpTo: 0), .badServerResponse))
        var other = self.machine()
        #expect(isFailure(other.waited(), .badServerResponse))
    }
}

/// The upload fields, parsed as Structured Fields.
@Suite("UploadFields")
struct UploadFieldsTests {
    func fields(_ pairs: [(String, String)]) -> UploadFields {
        UploadFields(HeaderFields(pairs.map { (name: $0.0, value: $0.1) }))
    }

    @Test func integersAndBooleans() {
        let parsed = fields([
            ("Upload-Offset", "1234"), ("upload-complete", "?1"), ("Upload-Length", " 99 "),
            ("Upload-Draft-Interop-Version", "6"),
        ])
        #expect(parsed == UploadFields(offset: 1234, complete: true, length: 99, interopVersion: 6))
        #expect(fields([("Upload-Offset", "5;p=1")]).offset == 5)
    }

    @Test func otherShapesAreIgnored() {
        for bad in ["-1", "1.5", "abc", "1,2", "", "1234567890123456", "?1", "\"7\""] {
            #expect(fields([("Upload-Offset", bad)]).offset == nil, "\(bad)")
        }
        for bad in ["1", "?2", "true", "?1,?0", "?"] {
            #expect(fields([("Upload-Complete", bad)]).complete == nil, "\(bad)")
        }
        #expect(fields([("Upload-Offset", "1"), ("Upload-Offset", "2")]).offset == nil)
    }

    @Test func tusFieldsAreListsAndAnInteger() {
        let parsed = fields([
            ("Tus-Version", "1.0.0, 0.2.2"), ("Tus-Extension", "creation,termination"),
            ("Tus-Extension", " checksum "), ("Tus-Max-Size", "1073741824"), ("Upload-Offset", "10"),
        ])
        #expect(parsed.tusVersions == ["1.0.0", "0.2.2"])
        #expect(parsed.tusExtensions == ["creation", "termination", "checksum"])
        #expect(parsed.tusMaximumSize == 1 << 30)
        #expect(parsed.offset == 10)
        #expect(UploadFields.tusMetadata([:]) == nil)
        #expect(UploadFields.tusMetadata(["name": "a b", "type": "ü"]) == "name YSBi,type w7w=")
    }

    @Test func limitsAreADictionaryOfIntegers() {
        let limits = UploadLimits(
            fieldValue:
                "max-size=1000, min-size=0, max-append-size=100;x=1, min-append-size=10, max-age=60, other=\"x\""
        )
        #expect(
            limits
                == UploadLimits(
                    maximumSize: 1000,
                    minimumSize: 0,
                    maximumAppendSize: 100,
                    minimumAppendSize: 10,
                    maximumAge: 60
                )
        )
        #expect(UploadLimits(fieldValue: "expires=30")?.maximumAge == 30)
        #expect(UploadLimits(fieldValue: "min-size=0")?.minimumSize == 0)
        #expect(UploadLimits(fieldValue: "unknown=?1, flag") == UploadLimits())
    }

    @Test func aKnownLimitOfAnotherTypeOrABrokenDictionaryIsIgnoredWhole() {
        for bad in [
            "max-size=1.5", "max-size=\"1\"", "max-size", "max-size=-1", "Max-Size=1", "max-size=1,", "=1", "a=1 b=2",
        ] {
            #expect(UploadLimits(fieldValue: bad) == nil, "\(bad)")
        }
    }
}
