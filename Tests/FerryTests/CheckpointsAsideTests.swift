import Foundation
import Synchronization
import Testing

@testable import Ferry

/// The download's checkpoints off its writing path: one at a time, waited for at the end, and
/// a failed one fails the download (as a checkpoint on the writing path did).
@Suite("CheckpointsAside")
struct CheckpointsAsideTests {
    struct DiskFull: Error, Equatable {}

    /// A checkpoint that waits until the test lets it go, so the test sees it running.
    final class Gate: Sendable {
        private let open = Atomic(false)
        let entered = Atomic(0)

        func work() -> @Sendable () throws -> Void {
            { [self] in
                entered.add(1, ordering: .relaxed)
                while !open.load(ordering: .acquiring) { usleep(1_000) }
            }
        }

        func release() { open.store(true, ordering: .releasing) }
    }

    @Test func aCheckpointDueWhileOneRunsDoesNotStartASecond() async throws {
        let aside = CheckpointsAside()
        let gate = Gate()
        #expect(try aside.start(gate.work()))
        #expect(aside.isBusy)
        #expect(try aside.start(gate.work()) == false)
        gate.release()
        try await aside.finish()
        #expect(gate.entered.load(ordering: .relaxed) == 1)
        #expect(!aside.isBusy)
    }

    @Test func finishWaitsForTheCheckpointThatRuns() async throws {
        let aside = CheckpointsAside()
        let done = Atomic(false)
        #expect(
            try aside.start {
                usleep(20_000)
                done.store(true, ordering: .releasing)
            }
        )
        try await aside.finish()
        // Nothing of the checkpoint may land after finish() returned.
        let finished = done.load(ordering: .acquiring)
        #expect(finished)
    }

    @Test func aFailedCheckpointFailsTheFinish() async {
        let aside = CheckpointsAside()
        #expect((try? aside.start { throw DiskFull() }) == true)
        await #expect(throws: DiskFull.self) { try await aside.finish() }
        // Said once: a second finish has nothing to report.
        await #expect(throws: Never.self) { try await aside.finish() }
    }

    @Test func aFailedCheckpointFailsTheNextStart() async throws {
        let aside = CheckpointsAside()
        #expect(try aside.start { throw DiskFull() })
        while aside.isBusy { await Task.yield() }
        #expect(throws: DiskFull.self) {
            try aside.start { Issue.record("a checkpoint started after one failed") }
        }
        try await aside.finish()
    }

    @Test func finishWithoutACheckpointReturnsAtOnce() async throws {
        try await CheckpointsAside().finish()
    }
}
