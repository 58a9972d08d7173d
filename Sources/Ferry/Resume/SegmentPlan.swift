/// How a download of a known length is split across connections, and how far each part has
/// come: a value with no I/O.
///
/// The file `[0, length)` is covered by segments `[start, end)` without gaps or overlaps;
/// each has reached `next` (`start ≤ next ≤ end`: `[start, next)` is written). The transfer
/// asks the plan what to fetch, tells it what was written, and asks it to ``split()`` the
/// largest remaining segment when a connection is free, as aria2c rebalances: the segment's
/// end moves to the middle of what is left and a new segment takes the rest, so the first
/// connection stops where the second begins.
///
/// ## Invariants
/// - Segments are ordered by `start`, cover `[0, length)` exactly, and never overlap.
/// - A segment's `end` only moves down (by a split), and never below its `next`.
/// - No segment left after a split is smaller than ``minimumSize``, unless the file is.
struct SegmentPlan: Sendable, Equatable {
    typealias Segment = ResumeData.Segment

    let length: Int64
    let minimumSize: Int64
    private(set) var segments: [Segment]

    /// `count` segments of nearly equal size over `length` bytes (fewer when a segment would
    /// be smaller than `minimumSize`; at least one).
    init(length: Int64, count: Int, minimumSize: Int64) {
        self.length = length
        self.minimumSize = max(1, minimumSize)
        let parts = Int64(max(1, min(Int64(count), length / self.minimumSize)))
        var segments: [Segment] = []
        for index in 0..<parts {
            let start = length * index / parts
            let end = length * (index + 1) / parts
            segments.append(Segment(start: start, next: start, end: end))
        }
        self.segments = segments.isEmpty ? [Segment(start: 0, next: 0, end: 0)] : segments
    }

    /// A plan as resume data recorded it; `nil` when the record does not describe a valid
    /// plan of `length` bytes (then the download starts over).
    init?(length: Int64, minimumSize: Int64, segments: [Segment]) {
        let sorted = segments.sorted { $0.start < $1.start }
        var covered: Int64 = 0
        for segment in sorted {
            guard segment.start == covered, segment.start <= segment.next, segment.next <= segment.end else {
                return nil
            }
            covered = segment.end
        }
        guard covered == length, !sorted.isEmpty else { return nil }
        self.length = length
        self.minimumSize = max(1, minimumSize)
        self.segments = sorted
    }

    /// Every byte is written.
    var isComplete: Bool { segments.allSatisfy(\.isDone) }

    /// Bytes written in all segments.
    var written: Int64 { segments.reduce(0) { $0 + ($1.next - $1.start) } }

    /// The bytes written without a gap from the start of the file: what a reader of resume
    /// data that knows nothing of segments may trust.
    var contiguousPrefix: Int64 {
        var prefix: Int64 = 0
        for segment in segments {
            guard segment.start == prefix else { break }
            prefix = segment.next
            if !segment.isDone { break }
        }
        return prefix
    }

    /// The starts (which identify segments: a split never moves one) of the segments with
    /// bytes left to fetch.
    var unfinished: [Int64] { segments.filter { !$0.isDone }.map(\.start) }

    /// Where the segment starting at `start` has to write next, and where it must stop
    /// (`nil` for no such segment).
    func position(of start: Int64) -> (next: Int64, end: Int64)? {
        segments.first { $0.start == start }.map { ($0.next, $0.end) }
    }

    /// Records that `count` bytes were written at the `next` of the segment starting at
    /// `start`. Returns how many of them belong to it (the rest lie past its end, which a
    /// split may have moved: they are another segment's to write).
    @discardableResult
    mutating func advance(_ start: Int64, by count: Int64) -> Int64 {
        guard let index = segments.firstIndex(where: { $0.start == start }) else { return 0 }
        let taken = max(0, min(count, segments[index].remaining))
        segments[index].next += taken
        return taken
    }

    /// Splits the segment with the most bytes left in two, if both halves stay at least
    /// ``minimumSize``: the old one now ends in the middle, the new one (whose start is
    /// returned) takes the rest, not started.
    mutating func split() -> Int64? {
        guard let largest = segments.indices.max(by: { segments[$0].remaining < segments[$1].remaining }) else {
            return nil
        }
        let segment = segments[largest]
        guard segment.remaining >= 2 * minimumSize else { return nil }
        let middle = segment.next + segment.remaining / 2
        segments[largest].end = middle
        segments.insert(Segment(start: middle, next: middle, end: segment.end), at: largest + 1)
        return middle
    }
}
