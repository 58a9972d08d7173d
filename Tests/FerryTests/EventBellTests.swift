import FerryBackground
import Testing

@Suite("EventBell")
struct EventBellTests {
    @Test func aRingAfterTheReadingEndsTheWaitAtOnce() async {
        let bell = EventBell()
        let reading = bell.generation
        bell.ring()
        // Rang after the reading: the wait returns without its (hour-long) timeout.
        await bell.wait(past: reading, timeout: .seconds(3600))
        #expect(bell.generation == reading + 1)
    }

    /// Whether the ring comes before the waiter parks or after, the wait ends (a missed
    /// ring would leave it for an hour).
    @Test func aWaiterIsWokenByTheNextRing() async {
        let bell = EventBell()
        let reading = bell.generation
        let waiter = Task { await bell.wait(past: reading, timeout: .seconds(3600)) }
        bell.ring()
        await waiter.value
        #expect(bell.generation == reading + 1)
    }

    @Test func withoutARingTheWaitEndsAtItsTimeout() async {
        let bell = EventBell()
        await bell.wait(past: bell.generation, timeout: .milliseconds(1))
        #expect(bell.generation == 0)
    }
}
