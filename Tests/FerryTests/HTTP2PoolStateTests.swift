import Foundation
import Testing

@testable import Ferry

@Suite("HTTP2Pool.State")
struct HTTP2PoolStateTests {
    typealias State = HTTP2Pool.State
    let a = State.Key(origin: Origin(URL(string: "https://a.example")!), slot: 0)
    let b = State.Key(origin: Origin(URL(string: "https://b.example:8443")!), slot: 0)

    @Test func aBurstToANewOriginOpensOneConnection() {
        var state = State(maximumConnections: 6)
        #expect(state.lease(a) == .connect(opening: 1))
        // Its limit unknown, the opening is taken to hold every request waiting.
        for _ in 0..<10 { #expect(state.lease(a) == .wait(opening: 1)) }
        _ = state.opened(1, limit: 100)
        #expect(state.openings.isEmpty)
        for _ in 0..<11 { #expect(state.lease(a) == .use(connection: 1)) }
        #expect(state.connections[1]?.streams == 11)
    }

    @Test func streamsBeyondTheServersLimitOpenMoreConnections() {
        var state = State(maximumConnections: 32)
        #expect(state.lease(a) == .connect(opening: 1))
        _ = state.opened(1, limit: 8)
        for _ in 0..<8 { #expect(state.lease(a) == .use(connection: 1)) }
        // Full: the next opens a second connection, and the seven after wait for it, as
        // the origin's connections allow eight streams each.
        #expect(state.lease(a) == .connect(opening: 2))
        for _ in 0..<7 { #expect(state.lease(a) == .wait(opening: 2)) }
        #expect(state.lease(a) == .connect(opening: 3))
        _ = state.opened(2, limit: 8)
        for _ in 0..<8 { #expect(state.lease(a) == .use(connection: 2)) }
        #expect(state.connections[1]?.streams == 8 && state.connections[2]?.streams == 8)
    }

    @Test func theFewestStreamsInUseFirst() {
        var state = State(maximumConnections: 2)
        _ = state.lease(a)
        _ = state.opened(1, limit: 1)
        #expect(state.lease(a) == .use(connection: 1))
        #expect(state.lease(a) == .connect(opening: 2))
        _ = state.opened(2, limit: 4)
        #expect(state.lease(a) == .use(connection: 2))
        state.released(1)
        #expect(state.lease(a) == .use(connection: 1))
        #expect(state.lease(a) == .use(connection: 2))
    }

    @Test func atTheLimitRequestsShareTheLeastBusyConnection() {
        var state = State(maximumConnections: 2)
        _ = state.lease(a)
        _ = state.opened(1, limit: 1)
        #expect(state.lease(a) == .use(connection: 1))
        #expect(state.lease(a) == .connect(opening: 2))
        _ = state.opened(2, limit: 1)
        #expect(state.lease(a) == .use(connection: 2))
        // Both full, no third allowed: the handler queues the stream on the least busy.
        #expect(state.lease(a) == .use(connection: 1))
        #expect(state.lease(a) == .use(connection: 2))
        #expect(state.connections[1]?.streams == 2)
    }

    @Test func atTheLimitWithAnOpeningUnderWayRequestsWaitForIt() {
        var state = State(maximumConnections: 1)
        #expect(state.lease(a) == .connect(opening: 1))
        _ = state.opened(1, limit: 1)
        #expect(state.lease(a) == .use(connection: 1))
        state.goingAway(1)
        #expect(state.lease(a) == .connect(opening: 2))
        _ = state.opened(2, limit: 1)
        #expect(state.lease(a) == .use(connection: 2))
        state.goingAway(2)
        state.closed(1)
        #expect(state.lease(a) == .connect(opening: 3))
        #expect(state.lease(a) == .wait(opening: 3))
    }

    @Test func eachSegmentSlotHasAConnectionOfItsOwn() {
        var state = State(maximumConnections: 6)
        let slot1 = State.Key(origin: a.origin, slot: 1)
        let slot2 = State.Key(origin: a.origin, slot: 2)
        _ = state.lease(a)
        _ = state.opened(1, limit: 100)
        #expect(state.lease(slot1) == .connect(opening: 2))
        #expect(state.lease(slot2) == .connect(opening: 3))
        _ = state.opened(2, limit: 100)
        _ = state.opened(3, limit: 100)
        #expect(state.lease(slot1) == .use(connection: 2))
        #expect(state.lease(slot2) == .use(connection: 3))
        #expect(state.lease(a) == .use(connection: 1))
    }

    @Test func aConnectionGoingAwayTakesNoNewRequest() {
        var state = State(maximumConnections: 6)
        _ = state.lease(a)
        _ = state.opened(1, limit: 100)
        #expect(state.lease(a) == .use(connection: 1))
        state.goingAway(1)
        #expect(state.lease(a) == .connect(opening: 2))
        // Its streams still end, and it is forgotten when it closes.
        state.released(1)
        state.closed(1)
        #expect(state.connections[1] == nil)
    }

    @Test func aFailedOpeningLetsTheNextRequestOpenAgain() {
        var state = State(maximumConnections: 6)
        #expect(state.lease(a) == .connect(opening: 1))
        #expect(state.lease(a) == .wait(opening: 1))
        state.failed(1)
        #expect(state.lease(a) == .connect(opening: 2))
    }

    @Test func aWaiterThatLeavesFreesItsPlaceInTheOpening() {
        var state = State(maximumConnections: 32)
        _ = state.lease(a)
        _ = state.opened(1, limit: 2)
        #expect([state.lease(a), state.lease(a)] == [.use(connection: 1), .use(connection: 1)])
        // The second connection is taken to hold two streams: its opener and one waiter.
        #expect([state.lease(a), state.lease(a)] == [.connect(opening: 2), .wait(opening: 2)])
        // The waiter left (cancelled, timed out): the next request waits in its place,
        // rather than opening a third connection.
        state.stoppedWaiting(2)
        #expect([state.lease(a), state.lease(a)] == [.wait(opening: 2), .connect(opening: 3)])
        // An opening that ended already is left alone.
        state.failed(3)
        state.stoppedWaiting(3)
        #expect(state.openings[3] == nil)
    }

    @Test func anOriginThatChoseHTTP11IsRemembered() {
        var state = State(maximumConnections: 6)
        #expect(state.lease(a) == .connect(opening: 1))
        #expect(state.lease(a) == .wait(opening: 1))
        state.negotiatedHTTP1(1)
        #expect(state.lease(a) == .http1)
        #expect(state.lease(State.Key(origin: a.origin, slot: 3)) == .http1)
        #expect(state.lease(b) == .connect(opening: 2))
    }

    @Test func aLimitOfZeroIsTakenAsOne() {
        var state = State(maximumConnections: 1)
        _ = state.lease(a)
        _ = state.opened(1, limit: 100)
        #expect(state.lease(a) == .use(connection: 1))
        #expect(state.lease(a) == .use(connection: 1))
        state.limitChanged(1, to: 0)
        #expect(state.connections[1]?.limit == 1)
        // At the pool's limit, the stream is queued on the connection there is.
        #expect(state.lease(a) == .use(connection: 1))
    }

    /// The router can report a GOAWAY or a close before the pool has taken the connection
    /// it is opening: such a connection never takes a request.
    @Test func aConnectionThatWentAwayWhileOpeningIsNeverUsed() {
        var state = State(maximumConnections: 6)
        #expect(state.lease(a) == .connect(opening: 1))
        #expect(state.lease(a) == .wait(opening: 1))
        state.closed(1)
        let tookClosed = state.opened(1, limit: 100)
        #expect(!tookClosed)
        #expect(state.connections[1] == nil)
        #expect(state.lease(a) == .connect(opening: 2))

        state.goingAway(2)
        let tookGoingAway = state.opened(2, limit: 100)
        #expect(tookGoingAway)
        #expect(state.connections[2]?.usable == false)
        #expect(state.lease(a) == .connect(opening: 3))
    }
}
