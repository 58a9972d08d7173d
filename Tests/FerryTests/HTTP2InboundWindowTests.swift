import Testing

@testable import Ferry

@Suite("HTTP2InboundWindow")
struct HTTP2InboundWindowTests {
    @Test func anUpdateGoesOutOnceHalfTheWindowIsTaken() {
        var window = HTTP2InboundWindow(size: 100)
        let fits = window.received(60)
        #expect(fits && window.available == 40)
        let early = window.taken(30)
        #expect(early == nil && window.available == 40)
        // Half taken: everything taken so far is granted again.
        let update = window.taken(20)
        #expect(update == 50 && window.available == 90)
        let after = window.taken(10)
        #expect(after == nil)
    }

    @Test func moreThanWasGrantedIsRefusedAndChangesNothing() {
        var window = HTTP2InboundWindow(size: 100)
        let all = window.received(100)
        let more = window.received(1)
        #expect(all && !more && window.available == 0)
        // Taking the bytes opens the window again, and what was refused now fits.
        let update = window.taken(100)
        let again = window.received(1)
        #expect(update == 100 && again)
    }

    @Test func aWindowThatStartsSmallerGrowsToItsSize() {
        // The connection's window starts at the protocol's 65,535 bytes until the update
        // raising it is read.
        var window = HTTP2InboundWindow(size: 1 << 20, available: 65_535)
        let tooMuch = window.received(65_536)
        let fits = window.received(65_535)
        #expect(!tooMuch && fits)
        let early = window.taken(65_535)
        let update = window.taken(1 << 19)
        #expect(early == nil && update == 65_535 + 1 << 19)
    }

    @Test func nothingTakenGrantsNothing() {
        var window = HTTP2InboundWindow(size: 1)
        let update = window.taken(0)
        let empty = window.received(0)
        #expect(update == nil && empty)
    }
}
