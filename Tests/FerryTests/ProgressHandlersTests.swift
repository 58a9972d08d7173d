import Dispatch
import Synchronization
import Testing

@testable import Ferry

/// `ProgressHandlers`: which calls are due, one event at a time. The calls are run here
/// without a queue, so each lands in `heard` as it is run.
@Suite("ProgressHandlers")
struct ProgressHandlersTests {
    final class Heard: Sendable {
        let calls = Mutex<[TransferProgress]>([])
        var all: [TransferProgress] { calls.withLock { $0 } }
        var handler: ProgressHandlers.Handler {
            .init(queue: nil) { progress in self.calls.withLock { $0.append(progress) } }
        }
    }

    static func progress(_ completed: Int64, _ total: Int64?) -> TransferProgress {
        TransferProgress(completedBytes: completed, totalBytes: total)
    }

    @Test func withoutHandlersNothingIsDue() {
        var handlers = ProgressHandlers()
        let up = handlers.progress(upload: true, completed: 1, total: 2)
        let down = handlers.progress(upload: false, completed: 1, total: 2)
        let counted = handlers.countReceived(1 << 20)
        let final = handlers.finalCalls(sent: 5, expectedToSend: 5, received: 5)
        #expect(up == nil && down == nil && !counted && final.isEmpty)
        #expect(handlers.queues.isEmpty)
    }

    @Test func eachDirectionGoesToItsOwnHandler() {
        let up = Heard()
        let down = Heard()
        var handlers = ProgressHandlers()
        handlers.set(up.handler, upload: true)
        handlers.set(down.handler, upload: false)
        handlers.progress(upload: true, completed: 10, total: 100)?.run()
        handlers.progress(upload: false, completed: 20, total: nil)?.run()
        #expect(up.all == [Self.progress(10, 100)])
        #expect(down.all == [Self.progress(20, nil)])
    }

    @Test func aHandlerSetAgainReplacesTheOneBefore() {
        let first = Heard()
        let second = Heard()
        var handlers = ProgressHandlers()
        handlers.set(first.handler, upload: false)
        handlers.set(second.handler, upload: false)
        handlers.progress(upload: false, completed: 1, total: 1)?.run()
        #expect(first.all.isEmpty && second.all == [Self.progress(1, 1)])
    }

    @Test func theFinalCallsAreTheTotalAndAreNotRepeated() {
        let up = Heard()
        let down = Heard()
        var handlers = ProgressHandlers()
        handlers.set(up.handler, upload: true)
        handlers.set(down.handler, upload: false)
        handlers.progress(upload: false, completed: 7, total: 7)?.run()
        // No length was announced for the upload: what was sent is the total. The download
        // heard 7 of 7 last: not again.
        let calls = handlers.finalCalls(sent: 3, expectedToSend: nil, received: 7)
        for call in calls { call.run() }
        #expect(calls.count == 1)
        #expect(up.all == [Self.progress(3, 3)])
        #expect(down.all == [Self.progress(7, 7)])
        let again = handlers.finalCalls(sent: 3, expectedToSend: nil, received: 7)
        #expect(again.isEmpty)
    }

    @Test func anUploadHandlerOfATaskThatSentNothingHearsNoFinalCall() {
        let up = Heard()
        var handlers = ProgressHandlers()
        handlers.set(up.handler, upload: true)
        let none = handlers.finalCalls(sent: 0, expectedToSend: nil, received: 10)
        #expect(none.isEmpty)
        // An announced empty body is 0 of 0, done.
        let calls = handlers.finalCalls(sent: 0, expectedToSend: 0, received: 10)
        for call in calls { call.run() }
        #expect(up.all == [Self.progress(0, 0)])
    }

    @Test func aDataTasksBytesAreCoalescedUntilACallIsDue() {
        let down = Heard()
        var handlers = ProgressHandlers()
        handlers.set(down.handler, upload: false)
        // The throttle lets the first bytes through, then holds the next within its interval.
        let start = ContinuousClock.now
        let first = handlers.countReceived(1, now: start)
        let within = handlers.countReceived(1, now: start + .milliseconds(49))
        let after = handlers.countReceived(1, now: start + ProgressThrottle.interval)
        #expect(first && !within && after)
    }

    @Test func theQueuesAreTheHandlers() {
        var handlers = ProgressHandlers()
        let queue = DispatchQueue(label: "progress")
        handlers.set(.init(queue: queue) { _ in }, upload: true)
        handlers.set(.init(queue: nil) { _ in }, upload: false)
        let queues = handlers.queues
        #expect(queues.count == 1 && queues.first === queue)
    }
}
