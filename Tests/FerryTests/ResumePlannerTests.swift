import Foundation
import Testing

@testable import Ferry

@Suite("ResumePlanner")
struct ResumePlannerTests {
    let url = URL(string: "http://h.test/f")!
    let etag = Validator.entityTag("\"v1\"")

    func response(_ status: Int, _ headers: [String: String] = [:]) -> HTTPResponse {
        HTTPResponse(
            url: url,
            statusCode: status,
            headers: HeaderFields(headers.map { (name: $0.key, value: $0.value) })
        )
    }

    func planner(
        bytes: Int64,
        total: Int64? = 1000,
        validator: Validator? = nil,
        unvalidated: Bool = false
    )
        -> ResumePlanner
    {
        ResumePlanner(
            partial: .init(bytesOnDisk: bytes, totalLength: total, validator: validator),
            allowUnvalidatedResume: unvalidated
        )
    }

    @Test func codedBodiesAreNeverContinuedWithARange() {
        var coded = ResumePlanner()
        let action = coded.evaluate(
            response(200, ["ETag": "\"v1\"", "Content-Length": "1000", "Content-Encoding": "gzip"]),
            for: .full
        )
        #expect(action == .writeFromStart(expectedLength: 1000, restart: nil))
        coded.recordWritten(upTo: 400)
        // A strong validator, bytes on disk, unvalidated resume even: still a full request.
        #expect(coded.partial.validator == etag)
        #expect(coded.nextRequest() == .full)
        #expect(!coded.canResume(withChecksum: true))
        // The same response without a coding continues as usual.
        var plain = ResumePlanner()
        _ = plain.evaluate(response(200, ["ETag": "\"v1\"", "Content-Length": "1000"]), for: .full)
        plain.recordWritten(upTo: 400)
        #expect(plain.nextRequest() == .range(from: 400, ifRange: "\"v1\""))
        #expect(plain.canResume(withChecksum: false))
        #expect(!ResumePlanner().canResume(withChecksum: false))
        #expect(ResumePlanner().canResume(withChecksum: true))
    }

    @Test func requestPlans() {
        #expect(planner(bytes: 0, validator: etag).nextRequest() == .full)
        #expect(planner(bytes: 10, validator: etag).nextRequest() == .range(from: 10, ifRange: "\"v1\""))
        #expect(planner(bytes: 10).nextRequest() == .full)
        #expect(planner(bytes: 10).restartReason == .noStrongValidator)
        #expect(planner(bytes: 10, unvalidated: true).nextRequest() == .range(from: 10, ifRange: nil))
        #expect(planner(bytes: 2000, total: 1000, validator: etag).nextRequest() == .full)
        #expect(planner(bytes: 2000, total: 1000, validator: etag).restartReason == .partialLargerThanTotal)
    }

    @Test func fullBodyRestartsAndLearnsTheNewValidator() {
        var p = planner(bytes: 10, validator: etag)
        let action = p.evaluate(
            response(200, ["ETag": "\"v1\"", "Content-Length": "1000"]),
            for: .range(from: 10, ifRange: "\"v1\"")
        )
        #expect(action == .writeFromStart(expectedLength: 1000, restart: .serverIgnoredRange))
        #expect(p.partial == .init(bytesOnDisk: 0, totalLength: 1000, validator: etag))
        var changed = planner(bytes: 10, validator: etag)
        let changedAction = changed.evaluate(
            response(200, ["ETag": "\"v2\""]),
            for: .range(from: 10, ifRange: "\"v1\"")
        )
        #expect(changedAction == .writeFromStart(expectedLength: nil, restart: .representationChanged))
        #expect(changed.partial.validator == .entityTag("\"v2\""))
    }

    @Test func partialContentIsWrittenWhereItReallyStarts() {
        var exact = planner(bytes: 100, validator: etag)
        #expect(
            exact.evaluate(
                response(206, ["Content-Range": "bytes 100-999/1000", "ETag": "\"v1\""]),
                for: .range(from: 100, ifRange: nil)
            )
                == .writeRange(offset: 100, skip: 0, length: 900)
        )
        var early = planner(bytes: 100, validator: etag)
        #expect(
            early.evaluate(response(206, ["Content-Range": "bytes 40-999/1000"]), for: .range(from: 100, ifRange: nil))
                == .writeRange(offset: 100, skip: 60, length: 900)
        )
        var short = planner(bytes: 100, validator: etag)
        #expect(
            short.evaluate(response(206, ["Content-Range": "bytes 100-199/1000"]), for: .range(from: 100, ifRange: nil))
                == .writeRange(offset: 100, skip: 0, length: 100)
        )
    }

    @Test func unusablePartialContent() {
        let plan = ResumePlanner.RequestPlan.range(from: 100, ifRange: "\"v1\"")
        var gap = planner(bytes: 100, validator: etag)
        #expect(
            gap.evaluate(response(206, ["Content-Range": "bytes 150-999/1000"]), for: plan) == .restart(.unusableRange)
        )
        var otherTotal = planner(bytes: 100, validator: etag)
        #expect(
            otherTotal.evaluate(response(206, ["Content-Range": "bytes 100-1999/2000"]), for: plan)
                == .restart(.representationChanged)
        )
        var otherTag = planner(bytes: 100, validator: etag)
        #expect(
            otherTag.evaluate(response(206, ["Content-Range": "bytes 100-999/1000", "ETag": "\"v2\""]), for: plan)
                == .restart(.representationChanged)
        )
        var coded = planner(bytes: 100, validator: etag)
        #expect(
            coded.evaluate(
                response(206, ["Content-Range": "bytes 100-999/1000", "Content-Encoding": "gzip"]),
                for: plan
            )
                == .restart(.unusableRange)
        )
        for bad in ["bytes 100-x/1000", "bytes */1000", "items 1-2/3", "bytes 100-999/500"] {
            var garbled = planner(bytes: 100, validator: etag)
            guard case .fail(let error) = garbled.evaluate(response(206, ["Content-Range": bad]), for: plan) else {
                Issue.record("\(bad) was accepted")
                continue
            }
            #expect(error.reason == .badServerResponse)
        }
        var lengthMismatch = planner(bytes: 100, validator: etag)
        guard
            case .fail = lengthMismatch.evaluate(
                response(206, ["Content-Range": "bytes 100-999/1000", "Content-Length": "5"]),
                for: plan
            )
        else {
            Issue.record("a Content-Length that contradicts Content-Range was accepted")
            return
        }
    }

    @Test func unsatisfiedRanges() {
        let plan = ResumePlanner.RequestPlan.range(from: 1000, ifRange: "\"v1\"")
        var complete = planner(bytes: 1000, validator: etag)
        #expect(
            complete.evaluate(response(416, ["Content-Range": "bytes */1000", "ETag": "\"v1\""]), for: plan)
                == .complete
        )
        var noTag = planner(bytes: 1000, validator: etag)
        #expect(
            noTag.evaluate(response(416, ["Content-Range": "bytes */1000"]), for: plan) == .restart(.unsatisfiableRange)
        )
        var otherLength = planner(bytes: 1000, validator: etag)
        #expect(
            otherLength.evaluate(response(416, ["Content-Range": "bytes */999", "ETag": "\"v1\""]), for: plan)
                == .restart(.unsatisfiableRange)
        )
        var unparsable = planner(bytes: 1000, validator: etag)
        #expect(unparsable.evaluate(response(416), for: plan) == .restart(.unsatisfiableRange))
        var unasked = planner(bytes: 0, validator: etag)
        guard case .fail = unasked.evaluate(response(416, ["Content-Range": "bytes */1000"]), for: .full) else {
            Issue.record("a 416 to a full request was not an error")
            return
        }
    }

    @Test func errorStatusesFail() {
        for status in [301, 404, 500, 503] {
            var p = planner(bytes: 10, validator: etag)
            guard case .fail(let error) = p.evaluate(response(status), for: .range(from: 10, ifRange: nil)) else {
                Issue.record("\(status) did not fail")
                continue
            }
            #expect(error.reason == .unacceptableStatusCode(status))
        }
    }

    @Test func completion() {
        var p = planner(bytes: 0, total: 10, validator: etag)
        #expect(!p.isComplete)
        p.recordWritten(upTo: 10)
        #expect(p.isComplete)
        p.reset()
        #expect(p.partial.bytesOnDisk == 0)
        #expect(!planner(bytes: 10, total: nil).isComplete)
    }
}

@Suite("Validators, Content-Range, retries")
struct ResumeParsingTests {
    let url = URL(string: "http://h.test/f")!

    @Test(arguments: [
        ("bytes 0-9/10", ContentRange.satisfied(first: 0, last: 9, complete: 10)),
        ("bytes 5-9/*", .satisfied(first: 5, last: 9, complete: nil)),
        ("bytes */42", .unsatisfied(complete: 42)),
        ("BYTES 1-1/2", .satisfied(first: 1, last: 1, complete: 2)),
    ])
    func contentRangeParses(value: String, expected: ContentRange) {
        #expect(ContentRange(value) == expected)
    }

    @Test(arguments: [
        "bytes 9-0/10", "bytes 0-10/10", "bytes -1-5/10", "bytes 0-9", "bytes */*", "bytes a-b/c", "", "bytes 0-9/1e3",
    ])
    func contentRangeRejects(value: String) {
        #expect(ContentRange(value) == nil)
    }

    /// `DQUOTE *etagc DQUOTE` (RFC 9110 §8.8.3), read as bytes.
    @Test(arguments: [
        ("\"abc\"", true),
        ("\"\"", true),
        ("\"\u{301}x\"", true),
        ("\"caf\u{E9}\"", true),
        ("\"", false),
        ("W/\"abc\"", false),
        ("\"a\"b\"", false),
        ("abc", false),
        ("\"abc", false),
        ("", false),
    ])
    func strongEntityTags(tag: String, strong: Bool) {
        #expect(Validator.isStrongEntityTag(tag) == strong)
    }

    @Test func strongValidators() {
        func response(_ headers: [String: String]) -> HTTPResponse {
            HTTPResponse(
                url: url,
                statusCode: 200,
                headers: HeaderFields(headers.map { (name: $0.key, value: $0.value) })
            )
        }
        #expect(Validator(response: response(["ETag": "\"abc\""])) == .entityTag("\"abc\""))
        #expect(Validator(response: response(["ETag": "W/\"abc\""])) == nil)
        #expect(Validator(response: response(["ETag": "abc"])) == nil)
        let old = "Wed, 21 Oct 2015 07:28:00 GMT"
        #expect(
            Validator(response: response(["Last-Modified": old, "Date": "Wed, 21 Oct 2015 07:28:01 GMT"]))
                == .lastModified(old)
        )
        #expect(Validator(response: response(["Last-Modified": old, "Date": old])) == nil)
        #expect(Validator(response: response(["Last-Modified": old])) == nil)
        // A weak ETag is not replaced by a date: the representation is only weakly identified.
        #expect(
            Validator(
                response: response(["ETag": "W/\"x\"", "Last-Modified": old, "Date": "Thu, 22 Oct 2015 00:00:00 GMT"])
            ) == nil
        )
    }

    @Test func retryClassificationAndBackoff() {
        let policy = RetryPolicy(maximumRetries: 3, baseDelay: 1, maximumDelay: 4)
        let network = FerryError(.network, "x")
        #expect(policy.delay(beforeRetry: 1, after: network, random: { $0.upperBound }) == 1)
        #expect(policy.delay(beforeRetry: 2, after: network, random: { $0.upperBound }) == 2)
        #expect(policy.delay(beforeRetry: 3, after: network, random: { $0.upperBound }) == 4)
        #expect(policy.delay(beforeRetry: 4, after: network) == nil)
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(policy.delay(beforeRetry: 1, after: FerryError(.unacceptableStatusCode(status), "x")) != nil)
        }
        for reason: FerryError.Reason in [
            .unacceptableStatusCode(404), .unacceptableStatusCode(501), .cancelled, .fileSystem, .timedOut(.resource),
        ] {
            #expect(policy.delay(beforeRetry: 1, after: FerryError(reason, "x")) == nil)
        }
        #expect(RetryPolicy.none.delay(beforeRetry: 1, after: network) == nil)
    }

    @Test func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(RetryPolicy.retryAfter("120", now: now) == 120)
        #expect(RetryPolicy.retryAfter(HTTPDate.format(now.addingTimeInterval(30)), now: now) == 30)
        #expect(RetryPolicy.retryAfter("soon", now: now) == nil)
        let limited = RetryPolicy(maximumRetries: 1, maximumRetryAfter: 10)
        var error = FerryError(.unacceptableStatusCode(503), "x")
        error.response = HTTPResponse(url: url, statusCode: 503, headers: ["Retry-After": "3600"])
        #expect(limited.delay(beforeRetry: 1, after: error) == 10)
    }

    @Test func resumeDataDropsCredentialsAndChecksConsistency() throws {
        let data = ResumeData(
            originalURL: url,
            currentURL: url,
            headers: ["Authorization": "Basic x", "Cookie": "a=b", "Accept": "*/*"],
            bytesOnDisk: 5,
            totalLength: 10,
            validator: .entityTag("\"a\""),
            partialFile: URL(fileURLWithPath: "/tmp/x.partial")
        )
        #expect(data.headers == ["Accept": "*/*"])
        #expect(try ResumeData(decoding: data.encoded()) == data)
        var inconsistent = data
        inconsistent.bytesOnDisk = 11
        #expect(throws: FerryError.self) { try ResumeData(decoding: inconsistent.encoded()) }
        var foreign = data
        foreign.version = 2
        #expect(throws: FerryError.self) { try ResumeData(decoding: foreign.encoded()) }
    }

    @Test func randomAndTruncatedResumeDataNeverCrash() throws {
        let valid = ResumeData(
            originalURL: url,
            currentURL: url,
            headers: [:],
            bytesOnDisk: 5,
            totalLength: 10,
            validator: .lastModified("Wed, 21 Oct 2015 07:28:00 GMT"),
            partialFile: URL(fileURLWithPath: "/tmp/y.partial")
        ).encoded()
        var generator = SystemRandomNumberGenerator()
        for length in 0..<valid.count {
            _ = try? ResumeData(decoding: valid.prefix(length))
        }
        for _ in 0..<500 {
            var mutated = valid
            let index = Int.random(in: 0..<mutated.count, using: &generator)
            mutated[index] = UInt8.random(in: 0...255, using: &generator)
            _ = try? ResumeData(decoding: mutated)
            _ = try? ResumeData(decoding: Data((0..<Int.random(in: 0..<64)).map { _ in UInt8.random(in: 0...255) }))
        }
        #expect(try ResumeData(decoding: valid).bytesOnDisk == 5)
    }
}
