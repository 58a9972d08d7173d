import Foundation
import Testing

@testable import Ferry

/// The one judgement of a `206` (`ResumePlanner.judgeRange`), which the download on one
/// connection and every segment of a split one ask: each outcome, in the order it is
/// checked, and what the planner makes of it.
@Suite("ResumePlanner.RangeAnswer")
struct RangeAnswerTests {
    let url = URL(string: "http://h.test/f")!
    let etag = Validator.entityTag("\"v1\"")

    func partial(_ range: String?, _ headers: [String: String] = [:]) -> HTTPResponse {
        var fields = headers
        if let range { fields["Content-Range"] = range }
        return HTTPResponse(
            url: url,
            statusCode: 206,
            headers: HeaderFields(fields.map { (name: $0.key, value: $0.value) })
        )
    }

    func judge(_ response: HTTPResponse, from offset: Int64, total: Int64? = 1000) -> ResumePlanner.RangeAnswer {
        ResumePlanner.judgeRange(response, from: offset, validator: etag, totalLength: total)
    }

    @Test func aRangeFromTheByteAskedContinues() {
        #expect(
            judge(partial("bytes 400-999/1000", ["ETag": "\"v1\""]), from: 400)
                == .continues(skip: 0, length: 600, complete: 1000)
        )
        // No validator on the 206: taken on the If-Range the request sent.
        #expect(judge(partial("bytes 400-999/1000"), from: 400) == .continues(skip: 0, length: 600, complete: 1000))
        // An unknown complete length (`*`) is no other version.
        #expect(judge(partial("bytes 400-499/*"), from: 400) == .continues(skip: 0, length: 100, complete: nil))
        // A short range continues as far as it goes.
        #expect(judge(partial("bytes 400-449/1000"), from: 400) == .continues(skip: 0, length: 50, complete: 1000))
    }

    @Test func aRangeThatStartsEarlierIsSkippedToTheByteAsked() {
        #expect(judge(partial("bytes 300-999/1000"), from: 400) == .continues(skip: 100, length: 600, complete: 1000))
    }

    @Test func aRangeThatMissesTheByteAskedIsMisplaced() {
        #expect(judge(partial("bytes 500-999/1000"), from: 400) == .misplaced(first: 500, last: 999))
        #expect(judge(partial("bytes 0-399/1000"), from: 400) == .misplaced(first: 0, last: 399))
    }

    @Test func aRangeThatDoesNotParseOrContradictsItsLengthIsMalformed() {
        for range in [
            nil, "", "bytes 400-", "bytes 999-400/1000", "bytes 400-1000/1000", "items 0-1/2", "bytes */1000",
        ] {
            guard case .malformed(let message) = judge(partial(range), from: 400) else {
                Issue.record("\(String(describing: range)) must be malformed")
                continue
            }
            #expect(message.contains("does not parse"))
        }
        guard case .malformed(let message) = judge(partial("bytes 400-999/1000", ["Content-Length": "500"]), from: 400)
        else {
            Issue.record("a Content-Length that contradicts the range must be malformed")
            return
        }
        #expect(message.contains("does not match"))
        // A Content-Length that agrees is fine.
        #expect(
            judge(partial("bytes 400-999/1000", ["Content-Length": "600"]), from: 400)
                == .continues(skip: 0, length: 600, complete: 1000)
        )
    }

    @Test func aCodedRangeIsNeverTaken() {
        #expect(judge(partial("bytes 400-999/1000", ["Content-Encoding": "gzip"]), from: 400) == .coded)
        #expect(
            judge(partial("bytes 400-999/1000", ["Content-Encoding": "identity"]), from: 400)
                == .continues(skip: 0, length: 600, complete: 1000)
        )
    }

    @Test func anotherValidatorOrAnotherLengthIsAnotherVersion() {
        #expect(judge(partial("bytes 400-999/1000", ["ETag": "\"v2\""]), from: 400) == .otherVersion)
        #expect(judge(partial("bytes 400-1999/2000"), from: 400) == .otherVersion)
        // Without a known total, any complete length is taken.
        #expect(
            judge(partial("bytes 400-1999/2000"), from: 400, total: nil)
                == .continues(skip: 0, length: 1600, complete: 2000)
        )
    }

    @Test func theChecksRunInOrderMalformedFirst() {
        // Malformed before coded, coded before version, version before position.
        #expect(
            judge(partial("bytes 400-999/1000", ["Content-Length": "1", "Content-Encoding": "gzip"]), from: 400)
                != .coded
        )
        #expect(
            judge(partial("bytes 400-999/1000", ["Content-Encoding": "gzip", "ETag": "\"v2\""]), from: 400) == .coded
        )
        #expect(judge(partial("bytes 500-1999/2000"), from: 400) == .otherVersion)
    }

    @Test func aWholeBodyToARangeSaysWhetherTheVersionChanged() {
        func whole(_ headers: [String: String]) -> HTTPResponse {
            HTTPResponse(
                url: url,
                statusCode: 200,
                headers: HeaderFields(headers.map { (name: $0.key, value: $0.value) })
            )
        }
        #expect(ResumePlanner.wholeAnswer(whole(["ETag": "\"v1\""]), toRangeOf: etag) == .serverIgnoredRange)
        #expect(ResumePlanner.wholeAnswer(whole(["ETag": "\"v2\""]), toRangeOf: etag) == .representationChanged)
        #expect(ResumePlanner.wholeAnswer(whole([:]), toRangeOf: etag) == .representationChanged)
        #expect(ResumePlanner.wholeAnswer(whole(["ETag": "\"v2\""]), toRangeOf: nil) == .serverIgnoredRange)
    }

    @Test func thePlannerActsOnEachAnswer() {
        func planner() -> ResumePlanner {
            ResumePlanner(partial: .init(bytesOnDisk: 400, totalLength: 1000, validator: etag))
        }
        let plan = ResumePlanner.RequestPlan.range(from: 400, ifRange: "\"v1\"")
        var p = planner()
        #expect(
            p.evaluate(partial("bytes 300-999/1000"), for: plan) == .writeRange(offset: 400, skip: 100, length: 600)
        )
        p = planner()
        #expect(p.evaluate(partial("bytes 500-999/1000"), for: plan) == .restart(.unusableRange))
        p = planner()
        #expect(
            p.evaluate(partial("bytes 400-999/1000", ["Content-Encoding": "br"]), for: plan) == .restart(.unusableRange)
        )
        p = planner()
        #expect(
            p.evaluate(partial("bytes 400-999/1000", ["ETag": "\"v2\""]), for: plan) == .restart(.representationChanged)
        )
        p = planner()
        guard case .fail(let error) = p.evaluate(partial("bytes 400-"), for: plan) else {
            Issue.record("a malformed 206 fails the download")
            return
        }
        #expect(error.reason == .badServerResponse)
        #expect(error.reason.statusCode == nil, "not a status error: the owner drains the body and throws it")
    }
}
