import Foundation
import Testing

@testable import Ferry

/// Every event of the download loop, in each state that can receive it: what it decides,
/// with no I/O (the integration suites run the same loop against real servers).
@Suite("DownloadStateMachine")
struct DownloadStateMachineTests {
    let url = URL(string: "http://h.test/f")!
    let etag = Validator.entityTag("\"v1\"")
    let noDelay = RetryPolicy(maximumRetries: 2, baseDelay: 0, maximumDelay: 0)

    func response(_ status: Int, _ headers: [String: String] = [:]) -> HTTPResponse {
        HTTPResponse(
            url: url,
            statusCode: status,
            headers: HeaderFields(headers.map { (name: $0.key, value: $0.value) })
        )
    }

    /// A 200 of `length` bytes with a strong validator and byte ranges: one that can be split.
    func splittable(_ length: Int64 = 8_000_000) -> HTTPResponse {
        response(200, ["ETag": "\"v1\"", "Content-Length": "\(length)", "Accept-Ranges": "bytes"])
    }

    func machine(
        bytes: Int64 = 0,
        total: Int64? = nil,
        validator: Validator? = nil,
        connections: Int = 1,
        resumedSplit: Bool = false,
        policy: RetryPolicy? = nil
    ) -> DownloadStateMachine {
        DownloadStateMachine(
            planner: ResumePlanner(partial: .init(bytesOnDisk: bytes, totalLength: total, validator: validator)),
            retry: RetryBudget(policy: policy ?? noDelay),
            configuration: .init(connections: connections, minimumSegmentSize: 1_000_000),
            resumedSplit: resumedSplit
        )
    }

    // MARK: next

    @Test func aNewDownloadAsksForTheWholeBody() {
        var fresh = machine()
        #expect(fresh.next(bytesOnDisk: 0) == .send(.full, discardFirst: false))
    }

    @Test func bytesWithAValidatorAreContinuedWithARange() {
        var resumed = machine(bytes: 400, total: 1000, validator: etag)
        #expect(resumed.next(bytesOnDisk: 400) == .send(.range(from: 400, ifRange: "\"v1\""), discardFirst: false))
    }

    @Test func bytesNoRangeCanContinueAreDiscardedBeforeTheRequest() {
        var unvalidated = machine(bytes: 400, total: 1000)
        #expect(unvalidated.next(bytesOnDisk: 400) == .send(.full, discardFirst: true))
        #expect(unvalidated.planner.partial.bytesOnDisk == 0)
    }

    @Test func aResumedSplitDownloadContinuesItsSegments() {
        var split = machine(bytes: 0, total: 8_000_000, validator: etag, connections: 4, resumedSplit: true)
        #expect(split.isSplit)
        #expect(split.next(bytesOnDisk: 8_000_000) == .continueSegments)
    }

    // MARK: responseArrived

    @Test func anErrorStatusFailsWithItsStatusAndWritesNothing() {
        var fresh = machine()
        guard case .fail(let error) = fresh.responseArrived(response(404), for: .full) else {
            Issue.record("a 404 must fail")
            return
        }
        // The owner reads a status error with its body.
        #expect(error.reason.statusCode == 404)
    }

    @Test func aWholeBodyOnOneConnectionIsWrittenFromTheStartThenFinishes() {
        var fresh = machine()
        let head = response(200, ["ETag": "\"v1\"", "Content-Length": "1000"])
        #expect(
            fresh.responseArrived(head, for: .full) == .writeFromStart(expectedLength: 1000, restart: nil)
        )
        #expect(fresh.split(head, length: 1000) == .no)
        #expect(fresh.wroteFromStart(upTo: 1000) == .finish)
        #expect(fresh.planner.partial.bytesOnDisk == 1000)
    }

    @Test func aRangeThatCompletesTheFileFinishes() {
        var resumed = machine(bytes: 400, total: 1000, validator: etag)
        let head = response(206, ["ETag": "\"v1\"", "Content-Range": "bytes 400-999/1000", "Content-Length": "600"])
        #expect(
            resumed.responseArrived(head, for: .range(from: 400, ifRange: "\"v1\""))
                == .writeRange(offset: 400, skip: 0, length: 600)
        )
        #expect(resumed.wroteRange(upTo: 1000) == .finish)
    }

    @Test func aShort206AsksForTheRest() {
        var resumed = machine(bytes: 400, total: 1000, validator: etag)
        let head = response(206, ["ETag": "\"v1\"", "Content-Range": "bytes 400-499/1000", "Content-Length": "100"])
        #expect(
            resumed.responseArrived(head, for: .range(from: 400, ifRange: "\"v1\""))
                == .writeRange(offset: 400, skip: 0, length: 100)
        )
        #expect(resumed.wroteRange(upTo: 500) == .send(.range(from: 500, ifRange: "\"v1\""), discardFirst: false))
        #expect(resumed.restarts == 0, "asking for the rest is no restart")
    }

    @Test func aFileAlreadyCompleteNeedsNothingMore() {
        var resumed = machine(bytes: 1000, total: 1000, validator: etag)
        let head = response(416, ["ETag": "\"v1\"", "Content-Range": "bytes */1000"])
        #expect(
            resumed.responseArrived(head, for: .range(from: 1000, ifRange: "\"v1\"")) == .complete
        )
    }

    @Test func anAnswerThatDoesNotContinueTheBytesRestartsAndCountsIt() {
        var resumed = machine(bytes: 400, total: 1000, validator: etag)
        // A 416 whose length is not the one on disk: the file changed.
        let head = response(416, ["Content-Range": "bytes */2000"])
        let action = resumed.responseArrived(head, for: .range(from: 400, ifRange: "\"v1\""))
        #expect(action == .restart(.unsatisfiableRange))
        #expect(resumed.planner.partial.bytesOnDisk == 0)
        #expect(resumed.restarts == 0, "counted once the owner has emptied the file")
        #expect(resumed.restarted() == .send(.full, discardFirst: false))
        #expect(resumed.restarts == 1)
    }

    @Test func a200ToARangeReplacesTheBytesFromTheStart() {
        var resumed = machine(bytes: 400, total: 1000, validator: etag)
        let head = response(200, ["ETag": "\"v2\"", "Content-Length": "1200"])
        guard
            case .writeFromStart(1200, let restart?) = resumed.responseArrived(
                head,
                for: .range(from: 400, ifRange: "\"v1\"")
            )
        else {
            Issue.record("a 200 to a range must write from the start, as a restart")
            return
        }
        #expect(restart == .serverIgnoredRange || restart == .representationChanged)
    }

    @Test func restartsAreBounded() {
        var resumed = machine(bytes: 400, total: 1000, validator: etag)
        let changed = response(416, ["Content-Range": "bytes */2000"])
        var last: DownloadStateMachine.Action?
        for _ in 0...3 {
            resumed.recordWritten(upTo: 400)
            #expect(
                resumed.responseArrived(changed, for: .range(from: 400, ifRange: "\"v1\""))
                    == .restart(.unsatisfiableRange)
            )
            last = resumed.restarted()
        }
        guard case .fail(let error)? = last else {
            Issue.record("the fourth restart must fail: \(String(describing: last))")
            return
        }
        #expect(error.reason == .badServerResponse)
        #expect(error.description.contains("3 restarts"))
    }

    // MARK: Splitting

    @Test func aSplittableFirstResponseIsSplitIntoTheConnectionsWanted() {
        var wanted = machine(connections: 4)
        #expect(
            wanted.responseArrived(splittable(), for: .full) == .writeFromStart(expectedLength: 8_000_000, restart: nil)
        )
        guard case .into(let plan, let validator) = wanted.split(splittable(), length: 8_000_000) else {
            Issue.record("a splittable response must be split")
            return
        }
        #expect(plan.segments.count == 4)
        #expect(validator == etag, "every segment is checked against the first response's validator")
        wanted.splitStarted()
        #expect(wanted.isSplit)
        #expect(wanted.segmentsCompleted() == .finish)
        #expect(wanted.planner.partial.bytesOnDisk == 8_000_000)
    }

    @Test func aResponseThatCannotBeSplitSaysWhy() {
        let cases: [([String: String], String)] = [
            (["ETag": "\"v1\"", "Accept-Ranges": "bytes"], "length"),
            (["Content-Length": "8000000", "Accept-Ranges": "bytes"], "strong validator"),
            (["ETag": "\"v1\"", "Content-Length": "8000000"], "byte ranges"),
            (["ETag": "\"v1\"", "Content-Length": "1500000", "Accept-Ranges": "bytes"], "two segments"),
        ]
        for (headers, why) in cases {
            var wanted = machine(connections: 4)
            let head = response(200, headers)
            guard case .writeFromStart(let length, nil) = wanted.responseArrived(head, for: .full),
                case .refused(let reason) = wanted.split(head, length: length)
            else {
                Issue.record("\(headers) must be refused")
                continue
            }
            #expect(reason.contains(why), "\(reason)")
        }
    }

    @Test func oneConnectionNeverSplits() {
        var one = machine(connections: 1)
        #expect(
            one.responseArrived(splittable(), for: .full) == .writeFromStart(expectedLength: 8_000_000, restart: nil)
        )
        #expect(one.split(splittable(), length: 8_000_000) == .no)
    }

    @Test func afterARangeWasIgnoredTheDownloadNeverSplitsAgain() {
        var wanted = machine(connections: 4)
        _ = wanted.responseArrived(splittable(), for: .full)
        wanted.splitStarted()
        #expect(
            wanted.segmentsAbandoned(reason: "the server answered a range with the whole file", rangesIgnored: true)
                == .startOver(reason: "the server answered a range with the whole file", rangesIgnored: true)
        )
        #expect(!wanted.isSplit)
        #expect(wanted.next(bytesOnDisk: 0) == .send(.full, discardFirst: false))
        #expect(
            wanted.responseArrived(splittable(), for: .full) == .writeFromStart(expectedLength: 8_000_000, restart: nil)
        )
        #expect(wanted.split(splittable(), length: 8_000_000) == .no)
    }

    @Test func aFileThatChangedUnderItsSegmentsStartsOverAndMaySplitAgain() {
        var wanted = machine(connections: 4)
        _ = wanted.responseArrived(splittable(), for: .full)
        wanted.splitStarted()
        #expect(
            wanted.segmentsAbandoned(reason: "changed", rangesIgnored: false)
                == .startOver(reason: "changed", rangesIgnored: false)
        )
        _ = wanted.responseArrived(splittable(), for: .full)
        guard case .into = wanted.split(splittable(), length: 8_000_000) else {
            Issue.record("a changed file may be split again")
            return
        }
    }

    @Test func abandonedSegmentsCountAsRestarts() {
        var wanted = machine(connections: 4)
        for _ in 0..<3 {
            wanted.splitStarted()
            guard case .startOver = wanted.segmentsAbandoned(reason: "changed", rangesIgnored: false) else {
                Issue.record("the first three restarts start over")
                return
            }
        }
        wanted.splitStarted()
        guard case .fail(let error) = wanted.segmentsAbandoned(reason: "changed", rangesIgnored: false) else {
            Issue.record("the fourth fails")
            return
        }
        #expect(error.reason == .badServerResponse)
    }

    // MARK: Failures

    @Test func aTransientFailureWaitsThenContinuesFromTheBytesOnDisk() {
        var resumed = machine(bytes: 0, total: nil, validator: etag)
        _ = resumed.responseArrived(
            response(200, ["ETag": "\"v1\"", "Content-Length": "1000"]),
            for: .full
        )
        let cut = FerryError(.network, "reset")
        #expect(resumed.failed(cut, bytesOnDisk: 300, cancelled: false) == .wait(attempt: 1, delay: 0, after: cut))
        #expect(resumed.planner.partial.bytesOnDisk == 300)
        #expect(resumed.next(bytesOnDisk: 300) == .send(.range(from: 300, ifRange: "\"v1\""), discardFirst: false))
    }

    @Test func retriesAreBoundedByThePolicy() {
        var fresh = machine()
        let cut = FerryError(.network, "reset")
        #expect(fresh.failed(cut, bytesOnDisk: 0, cancelled: false) == .wait(attempt: 1, delay: 0, after: cut))
        #expect(fresh.failed(cut, bytesOnDisk: 0, cancelled: false) == .wait(attempt: 2, delay: 0, after: cut))
        #expect(fresh.failed(cut, bytesOnDisk: 0, cancelled: false) == .fail(cut))
    }

    @Test func cancellationAndFinalErrorsAreNeverRetried() {
        var fresh = machine()
        let cut = FerryError(.network, "reset")
        #expect(fresh.failed(cut, bytesOnDisk: 0, cancelled: true) == .fail(cut))
        #expect(fresh.failed(.cancelled(), bytesOnDisk: 0, cancelled: false) == .fail(.cancelled()))
        let disk = FerryError(.fileSystem, "full")
        #expect(fresh.failed(disk, bytesOnDisk: 0, cancelled: false) == .fail(disk))
        #expect(fresh.retry.retries == 0, "nothing was spent")
    }

    @Test func aSplitDownloadsFailureRetriesItsSegmentsWithTheSameBudget() {
        var split = machine(bytes: 0, total: 8_000_000, validator: etag, connections: 4, resumedSplit: true)
        let cut = FerryError(.badServerResponse, "a segment's response ended early")
        #expect(split.failed(cut, bytesOnDisk: 8_000_000, cancelled: false) == .wait(attempt: 1, delay: 0, after: cut))
        #expect(split.planner.partial.bytesOnDisk == 0, "a split file's length says nothing of what is written")
        #expect(split.next(bytesOnDisk: 8_000_000) == .continueSegments)
        #expect(split.failed(cut, bytesOnDisk: 8_000_000, cancelled: false) == .wait(attempt: 2, delay: 0, after: cut))
        #expect(split.failed(cut, bytesOnDisk: 8_000_000, cancelled: false) == .fail(cut))
    }

    @Test func theRetryPolicysDelayIsUsed() {
        var fresh = machine(policy: RetryPolicy(maximumRetries: 1, baseDelay: 2, maximumDelay: 2))
        let cut = FerryError(.network, "reset")
        guard case .wait(1, let delay, _) = fresh.failed(cut, bytesOnDisk: 0, cancelled: false) else {
            Issue.record("one retry")
            return
        }
        #expect((0...2).contains(delay))
    }
}
