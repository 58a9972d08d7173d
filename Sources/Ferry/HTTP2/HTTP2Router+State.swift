import NIOHPACK
import NIOHTTP1
import NIOHTTP2

extension HTTP2Router {
    /// One HTTP/2 connection's streams and flow control: the router's decisions as a value,
    /// with no I/O, as ``HTTP2Pool/State`` is the pool's.
    ///
    /// The router tells it what happened (a stream opened, a header block, the start of a
    /// `DATA` frame and its payload, bytes a reader took, a stream's end, `GOAWAY`, the
    /// connection's end) and performs what it answers: the frames to write, the reader to
    /// hand a response or bytes to, the stream to reset. `Sink` is whoever reads a stream
    /// (a ``ResponseStream`` in the router; anything in the tests).
    ///
    /// Guarantees, each tested in `HTTP2RouterStateTests`:
    /// - Client stream identifiers are odd, rising and never reused (RFC 9113 §5.1.1); when
    ///   they run out, the connection takes no more streams and goes away. A connection that
    ///   is going away or closed takes no new stream.
    /// - A `DATA` frame counts against the connection's window and its stream's (§6.9); one
    ///   past the connection's window is a connection error, one past its stream's a stream
    ///   error (`FLOW_CONTROL_ERROR`). The connection's window is granted again as frames
    ///   arrive (so that one slow stream never stops the others), a stream's as its reader
    ///   takes the bytes, its padding at once; updates are due once half a window is used.
    ///   The last frame of a stream is never granted again (the stream is closed).
    /// - `DATA` before the response's header block is a malformed response (§8.1), and so is
    ///   a header block without a valid `:status` or with `content-length` fields that are
    ///   not one number; a body longer than its `content-length` is reset as soon as it is,
    ///   one shorter fails at its end (§8.1.1). `HEAD` and `304` answers have no body.
    /// - Interim responses (1xx) are not the answer; a header block after the answer
    ///   (trailers) only ends the stream.
    /// - Frames of a stream that is over (cancelled, reset) are counted and dropped.
    /// - `GOAWAY` names the streams the server did not process: they may go again elsewhere.
    struct State<Sink> {
        /// What the router does about a request it was asked to open.
        enum OpenAction: Equatable {
            /// Send the request's header block as this stream.
            case send(HTTP2StreamID)
            /// The connection takes no more streams: the request goes elsewhere.
            case refuse
            /// As ``refuse``, and the stream identifiers just ran out: the pool is to hear
            /// that the connection is going away.
            case refuseAndGoAway
        }

        /// How a response broke the protocol (the router makes the error of each).
        enum Violation: Equatable {
            /// More than the window allowed.
            case flowControl
            /// No valid `:status`, a `content-length` that is not one number, or `DATA`
            /// before the answer.
            case malformedResponse
            /// A body longer or shorter than its `content-length`.
            case contentLength
        }

        /// What the router does about a header block.
        enum HeadersAction {
            /// Nothing: trailers that do not end the stream, or a stream that is over.
            case none
            /// Hand `head` to the reader; the stream ends with it when `endsStream`.
            case answer(Sink, HTTPResponseHead, endsStream: Bool)
            /// An interim (1xx) response, `103 Early Hints` or `100 Continue`: told to the
            /// reader, not the answer.
            case interim(Sink, HTTPResponseHead)
            /// The stream ended successfully with a trailer section (`HEADERS` with
            /// `END_STREAM` after the answer), whose fields (pseudo-fields left out, §8.1)
            /// the reader is told.
            case trailers(Sink, HTTPHeaders)
            /// Fail the stream and send `RST_STREAM` with this code.
            case reset(HTTP2ErrorCode, Violation)
        }

        /// What the router does about the start of a `DATA` frame.
        enum FrameAction: Equatable {
            /// The frame is accepted: its payload follows. The `WINDOW_UPDATE` increments due
            /// for the connection and for the stream (its padding), if any.
            case accept(connectionUpdate: Int?, streamUpdate: Int?)
            /// Fail the stream and reset it with this code (its payload is dropped).
            case reset(connectionUpdate: Int?, HTTP2ErrorCode, Violation)
            /// The server sent more than the connection's window: `GOAWAY`, every stream
            /// fails, nothing more is read.
            case connectionError
        }

        /// What the router does with a `DATA` frame's payload.
        enum PayloadAction: Equatable {
            /// Gather it for the stream's reader.
            case deliver
            /// Drop it: the stream is over.
            case drop
            /// Fail the stream and reset it with this code.
            case reset(HTTP2ErrorCode, Violation)
        }

        /// A stream that ended.
        struct Ended {
            /// Its reader, to hear how it ended.
            var sink: Sink
            /// Why a stream that ended well is a failure after all (a body shorter than its
            /// `content-length`).
            var violation: Violation?
            /// No stream is left on the open connection: the idle timer starts.
            var leavesIdle: Bool
        }

        /// One stream's state.
        struct Stream {
            let sink: Sink
            /// A `HEAD` request's response has no body, whatever its `content-length`.
            let isHead: Bool
            var answered = false
            var window: HTTP2InboundWindow
            /// The body's length as `content-length` announced it, checked at its end.
            var announced: Int?
            var received = 0
            /// The frame with `END_STREAM` began: the stream is closed, no window is granted.
            var lastFrame = false
        }

        /// The window each stream keeps open.
        let streamWindow: Int
        /// Changed in place (`streams.modifyValue(forKey:)`) for a frame: not copied out and
        /// back (a copy retains and releases the stream's sink, for each of nginx's 8 KiB
        /// frames), nor through `streams[id]?.change()`, whose accessors allocate.
        private var streams: [HTTP2StreamID: Stream] = [:]
        private var nextStreamID: Int32
        private var connectionWindow: HTTP2InboundWindow
        /// `GOAWAY` came, the stream identifiers ran out, or the connection ended.
        private(set) var isGoingAway = false
        private(set) var isClosed = false

        /// - Parameters:
        ///   - streamWindow: the window each stream keeps open (announced in the preface's
        ///     `SETTINGS_INITIAL_WINDOW_SIZE`).
        ///   - connectionWindow: the connection's (its update is written as the connection
        ///     starts, before any frame can arrive).
        ///   - firstStreamID: the first stream's identifier (odd; the tests start near the end).
        init(streamWindow: Int, connectionWindow: Int, firstStreamID: Int32 = 1) {
            self.streamWindow = streamWindow
            self.connectionWindow = HTTP2InboundWindow(size: connectionWindow)
            nextStreamID = firstStreamID
        }

        /// Streams open.
        var openStreams: Int { streams.count }

        /// Whether stream `id` is open.
        func isOpen(_ id: HTTP2StreamID) -> Bool { streams.index(forKey: id) != nil }

        /// Whether the `DATA` of stream `id` is this connection's: a stream it opened (odd,
        /// below the next identifier). `DATA` of any other is a connection error, which
        /// `NIOHTTP2Handler` makes of it.
        func owns(_ id: HTTP2StreamID) -> Bool {
            let number = Int32(id)
            return number % 2 == 1 && number < nextStreamID
        }

        /// The reader of stream `id`, while it is open.
        func sink(of id: HTTP2StreamID) -> Sink? { streams[id]?.sink }

        /// A request asks for a stream; `isHead` when it is a `HEAD` request.
        mutating func open(_ sink: Sink, isHead: Bool) -> OpenAction {
            if nextStreamID >= Int32.max - 1, !isGoingAway {
                isGoingAway = true
                return .refuseAndGoAway
            }
            guard !isGoingAway, !isClosed else { return .refuse }
            let id = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            streams[id] = Stream(sink: sink, isHead: isHead, window: HTTP2InboundWindow(size: streamWindow))
            return .send(id)
        }

        /// A header block arrived on stream `id`.
        mutating func headers(_ block: HPACKHeaders, endStream: Bool, on id: HTTP2StreamID) -> HeadersAction {
            guard let index = streams.index(forKey: id) else { return .none }
            if streams.values[index].answered {
                guard endStream else { return .none }
                var trailers = HTTPHeaders()
                for (name, value, _) in block where !name.hasPrefix(":") { trailers.add(name: name, value: value) }
                return .trailers(streams.values[index].sink, trailers)
            }
            guard let status = block.first(name: ":status").flatMap({ Int($0) }) else {
                return .reset(.protocolError, .malformedResponse)
            }
            var fields = HTTPHeaders()
            fields.reserveCapacity(block.count)
            for (name, value, _) in block where !name.hasPrefix(":") { fields.add(name: name, value: value) }
            // An interim response (103 Early Hints, 100 Continue) is not the answer; one that
            // ends the stream is malformed (RFC 9113 §8.1).
            if (100..<200).contains(status) {
                if endStream { return .reset(.protocolError, .malformedResponse) }
                let head = HTTPResponseHead(version: .http2, status: .init(statusCode: status), headers: fields)
                return .interim(streams.values[index].sink, head)
            }
            guard let announced = Self.announcedLength(fields, status: status, isHead: streams.values[index].isHead)
            else {
                return .reset(.protocolError, .malformedResponse)
            }
            streams.values[index].announced = announced
            streams.values[index].answered = true
            let head = HTTPResponseHead(version: .http2, status: .init(statusCode: status), headers: fields)
            return .answer(streams.values[index].sink, head, endsStream: endStream)
        }

        /// The body's announced length: `.some(nil)` when there is none to check, `nil` when
        /// the `content-length` fields are not one number (§8.1.1, RFC 9110 §8.6). `HEAD`
        /// and `304` answers have none, whatever the field says.
        private static func announcedLength(_ fields: HTTPHeaders, status: Int, isHead: Bool) -> Int?? {
            if isHead || status == 304 { return .some(0) }
            let values = fields[canonicalForm: "content-length"]
            guard let first = values.first else { return .some(nil) }
            guard values.allSatisfy({ $0 == first }), let length = Int(first), length >= 0 else { return nil }
            return .some(length)
        }

        /// A `DATA` frame of stream `id` begins: `length` flow-controlled bytes (its
        /// payload and `padding`), the stream's last when `endStream`.
        mutating func dataFrame(
            _ id: HTTP2StreamID,
            flowControlled length: Int,
            padding: Int,
            endStream: Bool
        ) -> FrameAction {
            guard connectionWindow.received(length) else { return .connectionError }
            let connectionUpdate = connectionWindow.taken(length)
            // A stream that is over (cancelled, reset): its frames are counted and dropped.
            let refused = streams.modifyValue(forKey: id) { stream -> FrameAction? in
                // DATA before the response's header block (§8.1).
                guard stream.answered else {
                    return .reset(connectionUpdate: connectionUpdate, .protocolError, .malformedResponse)
                }
                guard stream.window.received(length) else {
                    return .reset(connectionUpdate: connectionUpdate, .flowControlError, .flowControl)
                }
                stream.lastFrame = endStream
                return nil
            }
            if case .some(.some(let refused)) = refused { return refused }
            // The padding never reaches the reader: its window is granted at once.
            let streamUpdate = padding > 0 ? taken(padding, of: id) : nil
            return .accept(connectionUpdate: connectionUpdate, streamUpdate: streamUpdate)
        }

        /// `count` bytes of payload of the `DATA` frame of stream `id` that began last.
        mutating func payload(_ id: HTTP2StreamID, count: Int) -> PayloadAction {
            let withinLength = streams.modifyValue(forKey: id) { stream -> Bool in
                stream.received += count
                return stream.announced.map { stream.received <= $0 } ?? true
            }
            switch withinLength {
            case nil: return .drop
            case true: return .deliver
            case false: return .reset(.protocolError, .contentLength)
            }
        }

        /// `bytes` of stream `id` were taken by its reader (or never reached it).
        ///
        /// - Returns: the stream's `WINDOW_UPDATE` increment, if one is due (never after the
        ///   stream's last frame began: a `WINDOW_UPDATE` on a closed stream is an error).
        mutating func taken(_ bytes: Int, of id: HTTP2StreamID) -> Int? {
            streams.modifyValue(forKey: id) { stream -> Int? in
                stream.lastFrame ? nil : stream.window.taken(bytes)
            } ?? nil
        }

        /// Stream `id` is over, well when `succeeded`.
        ///
        /// - Returns: its reader and how it ended; `nil` when it was over already.
        mutating func end(_ id: HTTP2StreamID, succeeded: Bool) -> Ended? {
            guard let stream = streams.removeValue(forKey: id) else { return nil }
            var violation: Violation?
            if succeeded, let announced = stream.announced, stream.received != announced {
                violation = .contentLength
            }
            return Ended(sink: stream.sink, violation: violation, leavesIdle: streams.isEmpty && !isClosed)
        }

        /// `GOAWAY` arrived: no new stream goes out.
        ///
        /// - Returns: the open streams after `lastStreamID`, which the server did not
        ///   process (§6.8): they may go again on another connection.
        mutating func goAway(lastStreamID: HTTP2StreamID) -> [HTTP2StreamID] {
            isGoingAway = true
            return streams.keys.filter { $0 > lastStreamID }.sorted()
        }

        /// The connection ended.
        ///
        /// - Returns: whether it was open until now (the pool is to hear of it once), and the
        ///   streams that were open, each to fail.
        mutating func close() -> (wasOpen: Bool, streams: [HTTP2StreamID]) {
            let wasOpen = !isClosed
            isClosed = true
            isGoingAway = true
            return (wasOpen, streams.keys.sorted())
        }
    }
}
