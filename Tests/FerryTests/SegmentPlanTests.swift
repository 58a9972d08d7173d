import Testing

@testable import Ferry

@Suite("SegmentPlan: a split download's parts, no I/O")
struct SegmentPlanTests {
    /// The invariants: ordered, gap-free, non-overlapping, `start ≤ next ≤ end`.
    private func expectCovers(_ plan: SegmentPlan) {
        var covered: Int64 = 0
        for segment in plan.segments {
            #expect(segment.start == covered)
            #expect(segment.start <= segment.next && segment.next <= segment.end)
            covered = segment.end
        }
        #expect(covered == plan.length)
    }

    @Test func equalPartsNeverSmallerThanTheMinimum() {
        let plan = SegmentPlan(length: 100, count: 4, minimumSize: 10)
        #expect(plan.segments.map(\.start) == [0, 25, 50, 75])
        expectCovers(plan)
        #expect(SegmentPlan(length: 100, count: 8, minimumSize: 30).segments.count == 3)
        #expect(SegmentPlan(length: 10, count: 8, minimumSize: 30).segments.count == 1, "too small to split")
        expectCovers(SegmentPlan(length: 1_000_003, count: 7, minimumSize: 1))
    }

    @Test func progressThePrefixAndCompletion() {
        var plan = SegmentPlan(length: 100, count: 4, minimumSize: 10)
        #expect(plan.advance(25, by: 25) == 25)
        #expect(plan.contiguousPrefix == 0, "the first segment has not started")
        #expect(plan.advance(0, by: 30) == 25, "bytes past a segment's end are not its own")
        #expect(plan.contiguousPrefix == 50)
        #expect(plan.written == 50)
        #expect(plan.unfinished == [50, 75])
        _ = plan.advance(50, by: 25)
        _ = plan.advance(75, by: 25)
        #expect(plan.isComplete)
        #expect(plan.contiguousPrefix == 100)
    }

    @Test func splittingTakesHalfOfTheLargestRemainder() {
        var plan = SegmentPlan(length: 100, count: 2, minimumSize: 10)
        _ = plan.advance(0, by: 50)
        _ = plan.advance(50, by: 10)
        // 40 bytes left in the second segment: split at 60 + 20.
        #expect(plan.split() == 80)
        #expect(plan.position(of: 50)! == (next: 60, end: 80))
        #expect(plan.position(of: 80)! == (next: 80, end: 100))
        expectCovers(plan)
        // Splitting goes on while both halves keep at least 10 bytes.
        var splits = 0
        while plan.split() != nil { splits += 1 }
        #expect(splits == 2)
        #expect(plan.segments.filter { !$0.isDone }.allSatisfy { $0.remaining >= 10 && $0.remaining < 20 })
        expectCovers(plan)
    }

    @Test func aRecordedPlanIsCheckedBeforeItIsTrusted() {
        typealias S = ResumeData.Segment
        let good = [S(start: 50, next: 60, end: 100), S(start: 0, next: 50, end: 50)]
        #expect(SegmentPlan(length: 100, minimumSize: 1, segments: good)?.contiguousPrefix == 60)
        #expect(SegmentPlan(length: 100, minimumSize: 1, segments: [S(start: 0, next: 10, end: 40)]) == nil, "a gap")
        #expect(
            SegmentPlan(
                length: 100,
                minimumSize: 1,
                segments: [S(start: 0, next: 60, end: 50), S(start: 50, next: 50, end: 100)]
            )
                == nil,
            "next past end"
        )
        #expect(
            SegmentPlan(
                length: 100,
                minimumSize: 1,
                segments: [S(start: 0, next: 0, end: 60), S(start: 50, next: 50, end: 100)]
            )
                == nil,
            "overlap"
        )
        #expect(SegmentPlan(length: 100, minimumSize: 1, segments: []) == nil)
    }
}
