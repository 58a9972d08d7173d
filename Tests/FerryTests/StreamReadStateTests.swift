import Foundation
import NIOCore
import Testing

@testable import Ferry

@Suite("StreamReadState: a stream task's reads, no I/O")
struct StreamReadStateTests {
    private func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func aReadCompletesAtOnceFromWhatIsBuffered() {
        var state = StreamReadState()
        #expect(state.received(bytes("hello world")) == nil)
        #expect(
            state.read(id: 1, minLength: 1, maxLength: 5)
                == .complete(.deliver(id: 1, Data("hello".utf8), atEOF: false))
        )
        #expect(
            state.read(id: 2, minLength: 6, maxLength: 100)
                == .complete(.deliver(id: 2, Data(" world".utf8), atEOF: false))
        )
    }

    @Test func aReadWaitsForItsMinimumAndTakesNoMoreThanItsMaximum() {
        var state = StreamReadState()
        #expect(state.read(id: 1, minLength: 4, maxLength: 6) == .wait)
        #expect(state.received(bytes("ab")) == nil)
        #expect(state.received(bytes("cdefgh")) == .deliver(id: 1, Data("abcdef".utf8), atEOF: false))
        #expect(
            state.read(id: 2, minLength: 0, maxLength: 10) == .complete(.deliver(id: 2, Data("gh".utf8), atEOF: false))
        )
        // minLength 0 with nothing buffered waits for a first byte.
        #expect(state.read(id: 3, minLength: 0, maxLength: 10) == .wait)
        #expect(state.received(bytes("i")) == .deliver(id: 3, Data("i".utf8), atEOF: false))
    }

    @Test func theEndOfInputCompletesShortReadsThenSaysEOF() {
        var state = StreamReadState()
        #expect(state.read(id: 1, minLength: 10, maxLength: 10) == .wait)
        #expect(state.received(bytes("abc")) == nil)
        #expect(state.endInput() == .deliver(id: 1, Data("abc".utf8), atEOF: true))
        #expect(state.read(id: 2, minLength: 1, maxLength: 10) == .complete(.deliver(id: 2, Data(), atEOF: true)))
    }

    @Test func bytesReadAheadGoBackInFront() {
        var state = StreamReadState()
        _ = state.received(bytes("world"))
        #expect(state.unread(bytes("hello ")) == nil)
        #expect(
            state.read(id: 1, minLength: 11, maxLength: 11)
                == .complete(.deliver(id: 1, Data("hello world".utf8), atEOF: false))
        )
        #expect(state.read(id: 2, minLength: 3, maxLength: 3) == .wait)
        #expect(state.unread(bytes("abc")) == .deliver(id: 2, Data("abc".utf8), atEOF: false))
    }

    @Test func bytesBeforeAFailureAreReadThenTheFailure() {
        var state = StreamReadState()
        _ = state.received(bytes("abc"))
        let broken = FerryError(.network, "reset")
        #expect(state.fail(broken) == nil)
        #expect(
            state.read(id: 1, minLength: 1, maxLength: 2) == .complete(.deliver(id: 1, Data("ab".utf8), atEOF: false))
        )
        #expect(
            state.read(id: 2, minLength: 5, maxLength: 5) == .complete(.deliver(id: 2, Data("c".utf8), atEOF: false))
        )
        #expect(state.read(id: 3, minLength: 1, maxLength: 5) == .complete(.fail(id: 3, broken)))
    }

    @Test func oneReadAtATimeAndSaneLengths() {
        var state = StreamReadState()
        #expect(state.read(id: 1, minLength: 1, maxLength: 5) == .wait)
        guard case .complete(.fail(id: 2, let error)) = state.read(id: 2, minLength: 1, maxLength: 5) else {
            Issue.record("a second waiting read was accepted")
            return
        }
        #expect(error.reason == .invalidRequest)
        #expect(state.abandon(id: 1, with: .cancelled()) == .fail(id: 1, .cancelled()))
        #expect(state.abandon(id: 1, with: .cancelled()) == nil, "abandoned once")
        for (min, max) in [(0, 0), (5, 4), (-1, 3)] {
            guard case .complete(.fail) = state.read(id: 9, minLength: min, maxLength: max) else {
                Issue.record("minLength \(min), maxLength \(max) was accepted")
                continue
            }
        }
    }

    @Test func theSocketIsReadOnlyBelowTheHighWatermark() {
        var state = StreamReadState(highWatermark: 8)
        var mayRead = state.mayReadFromSocket()
        #expect(mayRead)
        _ = state.received(bytes("12345678"))
        mayRead = state.mayReadFromSocket()
        #expect(!mayRead)
        var resume = state.shouldResumeReading()
        #expect(!resume, "nothing was read yet")
        _ = state.read(id: 1, minLength: 1, maxLength: 4)
        resume = state.shouldResumeReading()
        #expect(resume)
        resume = state.shouldResumeReading()
        #expect(!resume, "resumed once")
        mayRead = state.mayReadFromSocket()
        #expect(mayRead)
    }
}
