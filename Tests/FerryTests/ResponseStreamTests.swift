import NIOCore
import NIOEmbedded
import Testing

@testable import Ferry

/// The hand-over of a response's bytes from the event loop to the transfer's Swift task.
@Suite("ResponseStream")
struct ResponseStreamTests {
    /// A stream holding `parts`, as the event loop left them.
    func stream(holding parts: [String]) -> ResponseStream {
        let stream = ResponseStream(onActivity: {})
        let loop = EmbeddedEventLoop()
        for part in parts { #expect(stream.received(ByteBuffer(string: part), on: loop) == nil) }
        return stream
    }

    @Test(.timeLimit(.minutes(1)))
    func aTakeGetsEverythingBufferedThenTheEnd() async throws {
        let stream = stream(holding: ["ab", "cd"])
        #expect(try await stream.take().map { String(buffer: $0) } == ["ab", "cd"])
        stream.finish(.success(()))
        #expect(try await stream.take().isEmpty)
        #expect(try await stream.take().isEmpty, "the end is told again")
    }

    @Test(.timeLimit(.minutes(1)))
    func aTakeWaitsForBytesThatComeLater() async throws {
        let stream = stream(holding: [])
        let taker = Task { try await stream.take() }
        // Bytes come, then the end: the waiting take gets the bytes (woken by the end, which
        // does not wait for the wake timer).
        _ = stream.received(ByteBuffer(string: "late"), on: EmbeddedEventLoop())
        stream.finish(.success(()))
        #expect(try await taker.value.map { String(buffer: $0) }.joined() == "late")
    }

    /// A cancelled transfer stops at its next take, even when bytes are waiting: it never
    /// reads on after its cancellation.
    @Test(.timeLimit(.minutes(1)))
    func aCancelledTakeThrowsWithBytesWaiting() async {
        let stream = stream(holding: ["ab"])
        let taker = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await stream.take()
        }
        await #expect(throws: CancellationError.self) { try await taker.value }
        // The stream was given up: a later take is told so too.
        await #expect(throws: CancellationError.self) { try await stream.take() }
    }

    @Test(.timeLimit(.minutes(1)))
    func aFailureComesAfterTheBytesBeforeIt() async throws {
        struct Reset: Error {}
        let stream = stream(holding: ["ab"])
        stream.finish(.failure(Reset()))
        #expect(try await stream.take().map { String(buffer: $0) } == ["ab"])
        await #expect(throws: Reset.self) { try await stream.take() }
    }
}
