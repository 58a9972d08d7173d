import Foundation
import Testing

@testable import Ferry

/// `BackgroundDelivery` with strings for continuations: each action says who is woken.
@Suite("BackgroundDelivery")
struct BackgroundDeliveryTests {
    typealias Delivery = BackgroundDelivery<String>

    func event(_ task: Int64, seq: Int64 = 1) -> BackgroundEventRecord {
        var record = BackgroundEventRecord(session: "s", taskId: task, kind: .completed, detail: "/file")
        record.seq = seq
        return record
    }

    @Test func callersWaitUntilAttachingEnds() {
        var delivery = Delivery()
        let result1 = delivery.waitForAttachment("a")
        #expect(result1 == nil)
        let result2 = delivery.waitForAttachment("b")
        #expect(result2 == nil)
        let result3 = delivery.attached(error: nil)
        #expect(result3 == ["a", "b"])
        let result4 = delivery.waitForAttachment("late")
        #expect(result4 == "late")
        #expect(delivery.attachError == nil)
    }

    @Test func aFailedAttachmentIsKeptForLaterTasks() {
        var delivery = Delivery()
        let failure = FerryError(.network, "Cannot reach the daemon.")
        let result5 = delivery.attached(error: failure)
        #expect(result5.isEmpty)
        #expect(delivery.attachError == failure)
        let result6 = delivery.waitForAttachment("a")
        #expect(result6 == "a")
    }

    @Test func closingWakesEveryWaiter() {
        var delivery = Delivery()
        _ = delivery.waitForAttachment("caller")
        delivery.submissionStarted()
        guard case .waitForSubmission = delivery.offer(event(9), feed: "feed") else {
            Issue.record("the feed did not wait for the submission")
            return
        }
        let result7 = delivery.close()
        #expect(result7 == ["caller", "feed"])
        #expect(delivery.attachment == .closed)
        let result8 = delivery.waitForAttachment("after")
        #expect(result8 == "after")
    }

    @Test func anEventOfAnUnknownTaskIsSkipped() {
        var delivery = Delivery()
        guard case .skip = delivery.offer(event(1), feed: "feed") else {
            Issue.record("an unknown task's event was not skipped")
            return
        }
    }

    /// The daemon may report a task's end before the submission that made it has its id:
    /// the feed waits for the submission instead of skipping the event.
    @Test func anEventRacingItsSubmissionWaitsForIt() {
        var delivery = Delivery()
        delivery.submissionStarted()
        guard case .waitForSubmission = delivery.offer(event(5), feed: "feed") else {
            Issue.record("the feed did not wait")
            return
        }
        let result9 = delivery.submissionEnded(id: 5)
        #expect(result9 == "feed")
        guard case .deliver(let wake) = delivery.offer(event(5), feed: "feed") else {
            Issue.record("the event was not delivered once its task was known")
            return
        }
        #expect(wake == nil)
    }

    @Test func aFailedSubmissionLetsTheFeedSkip() {
        var delivery = Delivery()
        delivery.submissionStarted()
        _ = delivery.offer(event(5), feed: "feed")
        let result10 = delivery.submissionEnded(id: nil)
        #expect(result10 == "feed")
        guard case .skip = delivery.offer(event(5), feed: "feed") else {
            Issue.record("an event of no known task was not skipped")
            return
        }
    }

    @Test func aWaitingTransferIsWokenAndTakesItsEvent() {
        var delivery = Delivery()
        delivery.reattached(3)
        guard case .wait = delivery.waitForEvent(of: 3, waiter: "transfer", cancelled: false) else {
            Issue.record("the transfer did not wait")
            return
        }
        guard case .deliver(let wake) = delivery.offer(event(3), feed: "feed") else {
            Issue.record("the event was not delivered")
            return
        }
        #expect(wake == "transfer")
        let result11 = delivery.takeEvent(of: 3)
        #expect(result11?.taskId == 3)
        let result12 = delivery.takeEvent(of: 3)
        #expect(result12 == nil)
        let result13 = delivery.transferEnded(3)
        #expect(result13 == "feed")
    }

    @Test func anEventBeforeItsTransferWaitsIsReadyForIt() {
        var delivery = Delivery()
        delivery.reattached(3)
        guard case .deliver(let wake) = delivery.offer(event(3), feed: "feed") else {
            Issue.record("the event was not delivered")
            return
        }
        #expect(wake == nil)
        guard case .ready = delivery.waitForEvent(of: 3, waiter: "transfer", cancelled: false) else {
            Issue.record("the early event was not ready")
            return
        }
        let result14 = delivery.takeEvent(of: 3)
        #expect(result14?.taskId == 3)
        let result15 = delivery.transferEnded(3)
        #expect(result15 == "feed")
    }

    @Test func aCancelledTransferStopsWaitingAndItsLaterEventIsSkipped() {
        var delivery = Delivery()
        delivery.reattached(4)
        _ = delivery.waitForEvent(of: 4, waiter: "transfer", cancelled: false)
        let result16 = delivery.stopWaiting(4)
        #expect(result16 == "transfer")
        let result17 = delivery.takeEvent(of: 4)
        #expect(result17 == nil)
        let result18 = delivery.transferEnded(4)
        #expect(result18 == nil)
        guard case .skip = delivery.offer(event(4), feed: "feed") else {
            Issue.record("the event of a task that completed here was delivered")
            return
        }
    }

    @Test func aTransferCancelledBeforeWaitingDoesNotWait() {
        var delivery = Delivery()
        delivery.reattached(4)
        guard case .cancelled = delivery.waitForEvent(of: 4, waiter: "transfer", cancelled: true) else {
            Issue.record("a cancelled transfer waited")
            return
        }
        let result19 = delivery.stopWaiting(4)
        #expect(result19 == nil)
    }

    @Test func onlyNewProgressIsReported() {
        var delivery = Delivery()
        let result20 = delivery.report(100, for: 1)
        #expect(result20)
        let result21 = delivery.report(100, for: 1)
        #expect(!result21)
        let result22 = delivery.report(200, for: 1)
        #expect(result22)
        let result23 = delivery.report(100, for: 2)
        #expect(result23)
        _ = delivery.transferEnded(1)
        let result24 = delivery.report(200, for: 1)
        #expect(result24)
    }
}
