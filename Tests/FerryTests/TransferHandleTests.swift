import Foundation
import Synchronization
import Testing

@testable import Ferry

/// A transfer queued behind the per-host limit has no Swift task until its slot is granted:
/// the handle that stands in for it, and the limiter's side of the hand-over.
@Suite("Transfers started when their slot is granted")
struct TransferHandleTests {
    let origin = Origin(URL(string: "http://a.example")!)

    /// What a waiting handle's stand-in transfer saw: how often it was made, and whether it
    /// ran cancelled (it sleeps until it is).
    final class Probe: Sendable {
        private let state = Mutex((made: 0, ranCancelled: false))
        var made: Int { state.withLock { $0.made } }
        var ranCancelled: Bool { state.withLock { $0.ranCancelled } }

        func handle(deadline: ContinuousClock.Instant = .now + .seconds(3600)) -> TransferHandle {
            TransferHandle(resourceDeadline: deadline) { _, _ in
                self.state.withLock { $0.made += 1 }
                return Task {
                    try? await Task.sleep(for: .seconds(3600))
                    let cancelled = Task.isCancelled
                    self.state.withLock { $0.ranCancelled = cancelled }
                }
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aWaitingHandleMakesItsSwiftTaskOnce() async {
        let probe = Probe()
        let handle = probe.handle()
        #expect(probe.made == 0, "made before it was started")
        let first = handle.start()
        let second = handle.start()
        #expect(first != nil)
        #expect(first == second)
        #expect(probe.made == 1)
        handle.cancel()
        await first?.value
        #expect(probe.made == 1)
    }

    @Test(.timeLimit(.minutes(1)))
    func cancellingAWaitingHandleStartsItsSwiftTaskCancelled() async {
        let probe = Probe()
        let handle = probe.handle()
        handle.cancel()
        #expect(probe.made == 1)
        await handle.start()?.value  // ends only because it was cancelled
        #expect(probe.ranCancelled)
    }

    @Test(.timeLimit(.minutes(1)))
    func checkingTimeoutsStartsAHandleOnlyOnceItsResourceTimeoutIsDue() async {
        let notDue = Probe()
        let later = notDue.handle()
        later.checkTimeouts()
        #expect(notDue.made == 0)
        let due = Probe()
        let expired = due.handle(deadline: .now - .seconds(1))
        expired.checkTimeouts()
        expired.checkTimeouts()
        #expect(due.made == 1)
        #expect(notDue.made == 0)
        expired.cancel()
        later.cancel()
        await expired.start()?.value
        await later.start()?.value
    }

    /// What the transfers of inline-start tests did, in order.
    final class Log: Sendable {
        private let lines = Mutex<[String]>([])
        var entries: [String] { lines.withLock { $0 } }
        func add(_ line: String) { lines.withLock { $0.append(line) } }

        /// A handle whose transfer logs how it was made and that it began, runs `body`, then
        /// sleeps until it is cancelled.
        func handle(_ name: String, body: @escaping @Sendable () -> Void = {}) -> TransferHandle {
            TransferHandle(resourceDeadline: .now + .seconds(3600)) { _, inline in
                self.add("\(name) made inline: \(inline)")
                let run: @Sendable () async -> Void = {
                    self.add("\(name) began")
                    body()
                    try? await Task.sleep(for: .seconds(3600))
                }
                return inline ? Task.immediate(operation: run) : Task(operation: run)
            }
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aGrantFromASwiftTaskRunsTheTransferOnItsThreadUntilItSuspends() async {
        let log = Log()
        let handle = log.handle("next")
        let task = handle.start(inline: true)
        log.add("start returned")
        #expect(log.entries == ["next made inline: true", "next began", "start returned"])
        handle.cancel()
        await task?.value
    }

    @Test(.timeLimit(.minutes(1)))
    func aGrantFromOutsideASwiftTaskQueuesTheTransfer() async {
        let log = Log()
        let handle = log.handle("next")
        // A thread of no Swift task (an event loop's, say) never runs a transfer's work.
        let task = await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: handle.start(inline: true)) }.start()
        }
        #expect(log.entries.first == "next made inline: false")
        handle.cancel()
        await task?.value
    }

    @Test(.timeLimit(.minutes(1)))
    func aTransferStartedInlineStartsTheNextOneQueued() async {
        // One that ends before it suspends gives its slot to the next at once: that one is
        // queued, so a run of them never nests on one thread's stack.
        let log = Log()
        let second = log.handle("second")
        let first = log.handle("first") { second.start(inline: true) }
        let task = first.start(inline: true)
        #expect(log.entries.prefix(3) == ["first made inline: true", "first began", "second made inline: false"])
        first.cancel()
        second.cancel()
        await task?.value
        await second.start()?.value
    }

    @Test(.timeLimit(.minutes(1)))
    func aTransferStartedInlineMayCancelItsOwnHandle() async {
        // While it runs inline its handle is still being made: the cancel is kept, not
        // waited for (which would deadlock), and reaches the task once it exists.
        final class Own: Sendable {
            let handle = Mutex<TransferHandle?>(nil)
        }
        let log = Log()
        let own = Own()
        let handle = log.handle("next") { own.handle.withLock { $0 }?.cancel() }
        own.handle.withLock { $0 = handle }
        let task = handle.start(inline: true)
        #expect(task?.isCancelled == true)
        await task?.value  // ends only because it was cancelled
    }

    @Test func aStartedHandleIsTheTaskItWasGiven() {
        let task = Task {}
        let handle = TransferHandle(started: task)
        handle.checkTimeouts()
        #expect(handle.start() == task)
    }

    @Test func aGrantRunsTheStarterOfTheWaitingPlace() async throws {
        let limiter = HostLimiter(limit: 1)
        let holder = limiter.reserve(for: origin, priority: 0.5)
        #expect(!holder.waits)
        let waiting = limiter.reserve(for: origin, priority: 0.5)
        #expect(waiting.waits)
        let started = Atomic(0)
        #expect(!limiter.whenGranted(waiting) { started.add(1, ordering: .relaxed) })
        #expect(started.load(ordering: .relaxed) == 0)
        limiter.release(for: origin)
        #expect(started.load(ordering: .relaxed) == 1, "the grant did not start the transfer")
        try await limiter.acquire(waiting)  // the granted slot is taken at once
        #expect(limiter.running(for: origin) == 1)
        limiter.release(for: origin)
        #expect(limiter.running(for: origin) == 0)
        #expect(started.load(ordering: .relaxed) == 1)
    }

    @Test func aPlaceGrantedBeforeItsStarterCameStartsAtOnce() async throws {
        let limiter = HostLimiter(limit: 1)
        _ = limiter.reserve(for: origin, priority: 0.5)
        let waiting = limiter.reserve(for: origin, priority: 0.5)
        limiter.release(for: origin)
        let started = Atomic(0)
        #expect(limiter.whenGranted(waiting) { started.add(1, ordering: .relaxed) })
        #expect(started.load(ordering: .relaxed) == 0, "kept a starter for a place granted already")
        try await limiter.acquire(waiting)
        #expect(limiter.running(for: origin) == 1)
        #expect(limiter.whenGranted(limiter.reserve(for: .init(URL(string: "http://b.example")!), priority: 0.5)) {})
    }

    @Test func aPlaceGivenUpOrCancelledNeverRunsItsStarter() async throws {
        let limiter = HostLimiter(limit: 1)
        _ = limiter.reserve(for: origin, priority: 0.5)
        let givenUp = limiter.reserve(for: origin, priority: 0.5)
        let cancelled = limiter.reserve(for: origin, priority: 0.5)
        let started = Atomic(0)
        _ = limiter.whenGranted(givenUp) { started.add(1, ordering: .relaxed) }
        _ = limiter.whenGranted(cancelled) { started.add(1, ordering: .relaxed) }
        limiter.giveUp(givenUp)
        // A transfer cancelled in the queue gets its Swift task, cancelled, and leaves there.
        let waiter = Task { try await limiter.acquire(cancelled) }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        limiter.release(for: origin)
        #expect(started.load(ordering: .relaxed) == 0)
        #expect(limiter.running(for: origin) == 0, "a slot went to a place that was left")
    }
}
