import NIOHPACK
import NIOHTTP2
import Testing

@testable import Ferry

/// `HTTP2Router.State`: every guarantee its documentation lists, one event at a time. The
/// readers are numbers here; the router's are `ResponseStream`s.
@Suite("HTTP2Router.State")
struct HTTP2RouterStateTests {
    typealias State = HTTP2Router.State<Int>

    /// A state with small windows, so that updates and violations are a few bytes away.
    static func state(stream: Int = 100, connection: Int = 1000, first: Int32 = 1) -> State {
        State(streamWindow: stream, connectionWindow: connection, firstStreamID: first)
    }

    static func block(_ fields: [(String, String)]) -> HPACKHeaders {
        HPACKHeaders(fields)
    }

    static let ok = block([(":status", "200")])

    /// Opens a stream for `sink` and answers it with `fields` (a 200 unless they say).
    static func answered(_ state: inout State, sink: Int = 1, fields: [(String, String)] = []) -> HTTP2StreamID {
        guard case .send(let id) = state.open(sink, isHead: false) else {
            Issue.record("not opened")
            return 0
        }
        let response = fields.contains { $0.0 == ":status" } ? fields : [(":status", "200")] + fields
        _ = state.headers(block(response), endStream: false, on: id)
        return id
    }

    // MARK: Opening

    @Test func streamsAreOddRisingAndOwnedOnceOpened() {
        var state = Self.state()
        #expect(!state.owns(1))
        #expect(state.open(10, isHead: false) == .send(1))
        #expect(state.open(11, isHead: false) == .send(3))
        #expect(state.open(12, isHead: true) == .send(5))
        #expect(state.owns(1) && state.owns(3) && state.owns(5))
        // Even (server-initiated) and not yet opened identifiers are not the connection's.
        #expect(!state.owns(2) && !state.owns(7))
        #expect(state.isOpen(3) && state.sink(of: 3) == 11 && state.openStreams == 3)
    }

    @Test func whenIdentifiersRunOutTheConnectionGoesAwayOnce() {
        var state = Self.state(first: Int32.max - 2)
        #expect(state.open(1, isHead: false) == .send(HTTP2StreamID(Int32.max - 2)))
        #expect(state.open(2, isHead: false) == .refuseAndGoAway)
        #expect(state.isGoingAway)
        // The pool heard it once; later requests are only refused.
        #expect(state.open(3, isHead: false) == .refuse)
        #expect(state.openStreams == 1)
    }

    @Test func aConnectionGoingAwayOrClosedTakesNoStream() {
        var going = Self.state()
        _ = going.goAway(lastStreamID: 0)
        #expect(going.open(1, isHead: false) == .refuse)
        var closed = Self.state()
        _ = closed.close()
        #expect(closed.open(1, isHead: false) == .refuse)
        #expect(going.openStreams == 0 && closed.openStreams == 0)
    }

    // MARK: Header blocks

    @Test func theAnswerGoesToTheReaderWithoutPseudoHeaders() {
        var state = Self.state()
        _ = state.open(7, isHead: false)
        let action = state.headers(
            Self.block([(":status", "206"), ("content-length", "3"), ("etag", "\"a\"")]),
            endStream: false,
            on: 1
        )
        guard case .answer(let sink, let head, let endsStream) = action else {
            Issue.record("\(action)")
            return
        }
        #expect(sink == 7 && head.status.code == 206 && head.version == .http2 && !endsStream)
        #expect(head.headers["etag"] == ["\"a\""] && head.headers["content-length"] == ["3"])
        #expect(!head.headers.contains { $0.name.hasPrefix(":") })
    }

    @Test func anAnswerWithEndStreamEndsTheStream() {
        var state = Self.state()
        _ = state.open(1, isHead: false)
        guard case .answer(_, _, let endsStream) = state.headers(Self.ok, endStream: true, on: 1) else {
            Issue.record("not answered")
            return
        }
        #expect(endsStream)
    }

    @Test(arguments: [
        [("content-type", "text/plain")],
        [(":status", "OK")],
        [(":status", "")],
        [(":status", "200"), ("content-length", "5"), ("content-length", "6")],
        [(":status", "200"), ("content-length", "five")],
        [(":status", "200"), ("content-length", "-1")],
    ])
    func aMalformedAnswerResetsTheStream(fields: [(String, String)]) {
        var state = Self.state()
        _ = state.open(1, isHead: false)
        guard case .reset(let code, let violation) = state.headers(Self.block(fields), endStream: false, on: 1) else {
            Issue.record("not reset: \(fields)")
            return
        }
        #expect(code == .protocolError && violation == .malformedResponse)
    }

    @Test func repeatedEqualContentLengthsAreOneLength() {
        var state = Self.state()
        let id = Self.answered(&state, fields: [("content-length", "2"), ("content-length", "2")])
        _ = state.dataFrame(id, flowControlled: 3, padding: 0, endStream: true)
        #expect(state.payload(id, count: 2) == .deliver)
        #expect(state.payload(id, count: 1) == .reset(.protocolError, .contentLength))
    }

    @Test func interimResponsesAreToldNotTakenForTheAnswer() {
        var state = Self.state()
        _ = state.open(1, isHead: false)
        for status in [100, 103] {
            let block = Self.block([(":status", "\(status)"), ("link", "</a.css>; rel=preload")])
            guard case .interim(_, let head) = state.headers(block, endStream: false, on: 1) else {
                Issue.record("\(status) taken for the answer, or not told")
                return
            }
            #expect(head.status.code == status)
            #expect(head.headers["link"] == ["</a.css>; rel=preload"])
        }
        // DATA after an interim response is still DATA before the answer.
        #expect(
            state.dataFrame(1, flowControlled: 1, padding: 0, endStream: false)
                == .reset(connectionUpdate: nil, .protocolError, .malformedResponse)
        )
        guard case .answer = state.headers(Self.ok, endStream: false, on: 1) else {
            Issue.record("the final answer was not taken")
            return
        }
    }

    /// An interim response cannot end its stream: there is no answer then (RFC 9113 §8.1).
    @Test func anInterimResponseThatEndsTheStreamIsMalformed() {
        var state = Self.state()
        _ = state.open(1, isHead: false)
        guard
            case .reset(.protocolError, .malformedResponse) = state.headers(
                Self.block([(":status", "103")]),
                endStream: true,
                on: 1
            )
        else {
            Issue.record("a 103 with END_STREAM was not refused")
            return
        }
    }

    @Test func trailersOnlyEndTheStream() {
        var state = Self.state()
        let id = Self.answered(&state)
        guard case .none = state.headers(Self.block([("x-checksum", "1")]), endStream: false, on: id),
            case .trailers(_, let fields) = state.headers(
                Self.block([("x-checksum", "1"), (":status", "200")]),
                endStream: true,
                on: id
            ), fields["x-checksum"] == ["1"], !fields.contains(name: ":status")
        else {
            Issue.record("trailers taken for an answer")
            return
        }
    }

    @Test func aHeaderBlockOfAStreamThatIsOverIsIgnored() {
        var state = Self.state()
        guard case .none = state.headers(Self.ok, endStream: true, on: 1) else {
            Issue.record("a stream never opened was answered")
            return
        }
        let id = Self.answered(&state)
        _ = state.end(id, succeeded: false)
        guard case .none = state.headers(Self.ok, endStream: true, on: id) else {
            Issue.record("an ended stream was answered")
            return
        }
    }

    // MARK: DATA and flow control

    @Test func moreThanTheConnectionsWindowIsAConnectionErrorThatChangesNothing() {
        var state = Self.state(stream: 100, connection: 50)
        let id = Self.answered(&state)
        #expect(state.dataFrame(id, flowControlled: 51, padding: 0, endStream: false) == .connectionError)
        // The window was left as it was: what fits still does.
        #expect(
            state.dataFrame(id, flowControlled: 20, padding: 0, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
    }

    @Test func theConnectionsWindowIsGrantedAgainAsFramesArrive() {
        var state = Self.state(stream: 1000, connection: 100)
        let one = Self.answered(&state, sink: 1)
        let two = Self.answered(&state, sink: 2)
        #expect(
            state.dataFrame(one, flowControlled: 30, padding: 0, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
        // Half the connection's window arrived, over two streams whose readers took nothing.
        #expect(
            state.dataFrame(two, flowControlled: 20, padding: 0, endStream: false)
                == .accept(connectionUpdate: 50, streamUpdate: nil)
        )
        // The whole window is open again, and the next half is granted as it arrives: the
        // connection never waits for a slow reader.
        #expect(
            state.dataFrame(one, flowControlled: 50, padding: 0, endStream: false)
                == .accept(connectionUpdate: 50, streamUpdate: nil)
        )
    }

    @Test func moreThanTheStreamsWindowResetsTheStreamOnly() {
        var state = Self.state(stream: 10, connection: 1000)
        let id = Self.answered(&state)
        let other = Self.answered(&state, sink: 2)
        #expect(
            state.dataFrame(id, flowControlled: 11, padding: 0, endStream: false)
                == .reset(connectionUpdate: nil, .flowControlError, .flowControl)
        )
        #expect(
            state.dataFrame(other, flowControlled: 10, padding: 0, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
    }

    @Test func aStreamsWindowIsGrantedAgainAsItsReaderTakesTheBytes() {
        var state = Self.state(stream: 100, connection: 10_000)
        let id = Self.answered(&state)
        #expect(
            state.dataFrame(id, flowControlled: 100, padding: 0, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
        #expect(state.taken(49, of: id) == nil)
        // The window stays shut until the reader took half of it.
        #expect(
            state.dataFrame(id, flowControlled: 1, padding: 0, endStream: false)
                == .reset(connectionUpdate: nil, .flowControlError, .flowControl)
        )
        #expect(state.taken(1, of: id) == 50)
        #expect(
            state.dataFrame(id, flowControlled: 50, padding: 0, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
    }

    @Test func paddingIsGrantedAtOnce() {
        var state = Self.state(stream: 100, connection: 10_000)
        let id = Self.answered(&state)
        #expect(
            state.dataFrame(id, flowControlled: 60, padding: 10, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
        // 10 + 40 of padding: half the stream's window, granted without the reader.
        #expect(
            state.dataFrame(id, flowControlled: 40, padding: 40, endStream: false)
                == .accept(connectionUpdate: nil, streamUpdate: 50)
        )
    }

    @Test func theLastFrameIsNeverGrantedAgain() {
        var state = Self.state(stream: 100, connection: 10_000)
        let id = Self.answered(&state)
        #expect(
            state.dataFrame(id, flowControlled: 90, padding: 80, endStream: true)
                == .accept(connectionUpdate: nil, streamUpdate: nil)
        )
        #expect(state.taken(10, of: id) == nil)
    }

    @Test func framesOfAStreamThatIsOverAreCountedAndDropped() {
        var state = Self.state(stream: 100, connection: 100)
        let id = Self.answered(&state)
        _ = state.end(id, succeeded: false)
        // Counted against the connection (which the server spent), granted again with it.
        #expect(
            state.dataFrame(id, flowControlled: 50, padding: 0, endStream: false)
                == .accept(connectionUpdate: 50, streamUpdate: nil)
        )
        #expect(state.payload(id, count: 50) == .drop)
        #expect(state.taken(50, of: id) == nil)
        #expect(state.dataFrame(id, flowControlled: 101, padding: 0, endStream: false) == .connectionError)
    }

    @Test func aResetBeforeTheAnswerStillCountsAgainstTheConnection() {
        var state = Self.state(stream: 100, connection: 100)
        _ = state.open(1, isHead: false)
        #expect(
            state.dataFrame(1, flowControlled: 50, padding: 0, endStream: false)
                == .reset(connectionUpdate: 50, .protocolError, .malformedResponse)
        )
    }

    // MARK: Payload and length

    @Test func aBodyPastItsContentLengthIsResetAsSoonAsItIs() {
        var state = Self.state()
        let id = Self.answered(&state, fields: [("content-length", "5")])
        _ = state.dataFrame(id, flowControlled: 6, padding: 0, endStream: false)
        #expect(state.payload(id, count: 5) == .deliver)
        #expect(state.payload(id, count: 1) == .reset(.protocolError, .contentLength))
    }

    @Test func aBodyWithoutContentLengthIsNeverTooLong() {
        var state = Self.state(stream: 1 << 20, connection: 1 << 22)
        let id = Self.answered(&state)
        _ = state.dataFrame(id, flowControlled: 1 << 20, padding: 0, endStream: true)
        #expect(state.payload(id, count: 1 << 20) == .deliver)
        let ended = state.end(id, succeeded: true)
        #expect(ended?.violation == nil)
    }

    @Test(arguments: [("HEAD", "200"), ("GET", "304")])
    func headAnd304AnswersHaveNoBody(method: String, status: String) {
        var state = Self.state()
        guard case .send(let id) = state.open(1, isHead: method == "HEAD") else { return }
        _ = state.headers(Self.block([(":status", status), ("content-length", "10")]), endStream: false, on: id)
        _ = state.dataFrame(id, flowControlled: 1, padding: 0, endStream: true)
        #expect(state.payload(id, count: 1) == .reset(.protocolError, .contentLength))
        var empty = Self.state()
        guard case .send(let other) = empty.open(1, isHead: method == "HEAD") else { return }
        _ = empty.headers(Self.block([(":status", status), ("content-length", "10")]), endStream: false, on: other)
        #expect(empty.end(other, succeeded: true)?.violation == nil)
    }

    // MARK: Ends

    @Test func aBodyShorterThanItsContentLengthFailsAtItsEnd() {
        var state = Self.state()
        let id = Self.answered(&state, sink: 9, fields: [("content-length", "5")])
        _ = state.dataFrame(id, flowControlled: 4, padding: 0, endStream: true)
        _ = state.payload(id, count: 4)
        let ended = state.end(id, succeeded: true)
        #expect(ended?.sink == 9 && ended?.violation == .contentLength)
    }

    @Test func aFailedStreamIsNotJudgedByItsLength() {
        var state = Self.state()
        let id = Self.answered(&state, fields: [("content-length", "5")])
        #expect(state.end(id, succeeded: false)?.violation == nil)
    }

    @Test func aStreamEndsOnceAndTheLastLeavesTheConnectionIdle() {
        var state = Self.state()
        let one = Self.answered(&state, sink: 1)
        let two = Self.answered(&state, sink: 2)
        #expect(state.end(one, succeeded: true)?.leavesIdle == false)
        #expect(state.end(one, succeeded: true) == nil)
        #expect(!state.isOpen(one) && state.sink(of: one) == nil)
        #expect(state.end(two, succeeded: true)?.leavesIdle == true)
        #expect(state.openStreams == 0)
    }

    @Test func goAwayNamesTheStreamsTheServerDidNotProcess() {
        var state = Self.state()
        for sink in 1...4 { _ = state.open(sink, isHead: false) }  // 1, 3, 5, 7
        #expect(state.goAway(lastStreamID: 3) == [5, 7])
        #expect(state.isGoingAway && !state.isClosed)
        // The streams it did process go on.
        #expect(state.isOpen(1) && state.isOpen(3) && state.isOpen(5))
        #expect(state.open(5, isHead: false) == .refuse)
    }

    @Test func theConnectionsEndFailsEveryStreamAndIsHeardOnce() {
        var state = Self.state()
        for sink in 1...3 { _ = state.open(sink, isHead: false) }
        let first = state.close()
        #expect(first.wasOpen && first.streams == [1, 3, 5])
        #expect(state.isClosed && state.isGoingAway)
        // Streams ended after the connection's end leave nothing idle to time out.
        #expect(state.end(1, succeeded: false)?.leavesIdle == false)
        _ = state.end(3, succeeded: false)
        #expect(state.end(5, succeeded: false)?.leavesIdle == false)
        let second = state.close()
        #expect(!second.wasOpen && second.streams.isEmpty)
    }
}
