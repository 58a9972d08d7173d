import Foundation
import NIOCore

/// The read side of a stream task's connection as a value: the bytes that arrived and are
/// not read yet, whether input ended, and the one read that may be waiting for more.
///
/// No I/O happens here. ``StreamConnection`` owns one behind its lock, feeds it what the
/// connection delivers and what the task's user asks for, and performs the actions it
/// returns: complete a waiting read, or ask the socket for more.
///
/// ## Invariants
/// - At most one read waits at a time; a second concurrent read fails at once.
/// - A read completes with at least `minLength` bytes, or with fewer (possibly none) at the
///   end of input, and never more than `maxLength`.
/// - Bytes are handed out in the order they arrived, each once.
/// - The socket is read from only while fewer than ``highWatermark`` bytes are buffered
///   (back-pressure: a user who does not read slows the peer down through TCP).
struct StreamReadState: Sendable {
    /// One read waiting for bytes.
    struct Waiting: Sendable, Equatable {
        var id: Int
        var minLength: Int
        var maxLength: Int
    }

    /// What a read, or an event, means for the waiting read.
    enum Completion: Sendable, Equatable {
        /// Hand these bytes to read `id`; `atEOF` when input has ended and nothing is left.
        case deliver(id: Int, Data, atEOF: Bool)
        /// Fail read `id`.
        case fail(id: Int, FerryError)
    }

    enum ReadAction: Sendable, Equatable {
        /// Done at once.
        case complete(Completion)
        /// Wait: a later event completes it (or its timeout).
        case wait
    }

    let highWatermark: Int
    private(set) var buffered = ByteBuffer()
    private(set) var inputEnded = false
    private(set) var waiting: Waiting?
    private var failure: FerryError?
    /// The socket was not asked for more because the buffer was full.
    private(set) var readHeld = false

    init(highWatermark: Int = 1 << 20) { self.highWatermark = highWatermark }

    /// The user asks for `minLength…maxLength` bytes.
    mutating func read(id: Int, minLength: Int, maxLength: Int) -> ReadAction {
        guard waiting == nil else {
            return .complete(
                .fail(id: id, FerryError(.invalidRequest, "Another read is already waiting on this stream task."))
            )
        }
        guard maxLength > 0, minLength >= 0, minLength <= maxLength else {
            return .complete(
                .fail(
                    id: id,
                    FerryError(.invalidRequest, "A read needs 0 ≤ minLength ≤ maxLength and maxLength > 0.")
                )
            )
        }
        let request = Waiting(id: id, minLength: minLength, maxLength: maxLength)
        if let completion = complete(request) { return .complete(completion) }
        waiting = request
        return .wait
    }

    /// Bytes arrived from the connection. Returns the waiting read's completion, if they
    /// complete it.
    mutating func received(_ bytes: ByteBuffer) -> Completion? {
        var bytes = bytes
        buffered.writeBuffer(&bytes)
        return completeWaiting()
    }

    /// Bytes read ahead of the stream's user (past a response head) go back before the rest.
    mutating func unread(_ bytes: ByteBuffer) -> Completion? {
        var bytes = bytes
        bytes.writeBuffer(&buffered)
        buffered = bytes
        return completeWaiting()
    }

    /// Input ended: the peer closed its side, or the user closed reading.
    mutating func endInput() -> Completion? {
        inputEnded = true
        return completeWaiting()
    }

    /// The connection failed: a waiting read and every later one fail once the bytes that
    /// arrived before are read.
    mutating func fail(_ error: FerryError) -> Completion? {
        if failure == nil { failure = error }
        inputEnded = true
        return completeWaiting()
    }

    /// Read `id` ran out of time (or its Swift task was cancelled) with `error`, if it still
    /// waits.
    mutating func abandon(id: Int, with error: FerryError) -> Completion? {
        guard waiting?.id == id else { return nil }
        waiting = nil
        return .fail(id: id, error)
    }

    /// Whether the socket may be read from now; when not, the read is held until
    /// ``shouldResumeReading()`` says so.
    mutating func mayReadFromSocket() -> Bool {
        readHeld = buffered.readableBytes >= highWatermark && !inputEnded
        return !readHeld
    }

    /// After the user took bytes: whether a held socket read should now be made.
    mutating func shouldResumeReading() -> Bool {
        guard readHeld, buffered.readableBytes < highWatermark else { return false }
        readHeld = false
        return true
    }

    private mutating func completeWaiting() -> Completion? {
        guard let request = waiting, let completion = complete(request) else { return nil }
        waiting = nil
        return completion
    }

    /// The completion of `request` if it can complete now.
    private mutating func complete(_ request: Waiting) -> Completion? {
        let available = buffered.readableBytes
        if available >= max(request.minLength, 1) || (inputEnded && available > 0) {
            let count = min(available, request.maxLength)
            let data = Data(buffered.readBytes(length: count) ?? [])
            buffered.discardReadBytes()
            return .deliver(id: request.id, data, atEOF: inputEnded && buffered.readableBytes == 0 && failure == nil)
        }
        if inputEnded {
            if let failure { return .fail(id: request.id, failure) }
            return .deliver(id: request.id, Data(), atEOF: true)
        }
        // A read of "whatever is there" (minLength 0) waits for a first byte too, as
        // URLSession's does.
        return nil
    }
}
