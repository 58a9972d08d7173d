/// What a server may still send on one flow-controlled unit (a stream, or the whole
/// connection), and when to let it send more (RFC 9113 §5.2, §6.9): a value with no I/O.
///
/// A `DATA` frame's whole length (padding included) is ``received(_:)`` as it arrives; a
/// frame larger than what was granted is a flow-control error. Bytes are ``taken(_:)`` when
/// they leave the client's hands (read by the stream's reader, or on arrival for the
/// connection); once half the window is taken, ``taken(_:)`` returns the `WINDOW_UPDATE`
/// increment to send, as nghttp2 does, so updates stay few and the window stays open.
struct HTTP2InboundWindow: Equatable {
    /// What each stream of Ferry's connections may have in flight: 10 MiB, curl's stream
    /// window (curl 7.88 offers 32 MiB). A server that waits for `WINDOW_UPDATE` before it
    /// goes on (Apache httpd's mod_http2 hands the data over from a worker thread) runs at its
    /// own pace only with a window several of its round trips wide: 256 MiB from mod_http2
    /// over TLS on loopback, medians of 8 alternating runs, took 0.40 s with 1 MiB (curl
    /// 0.43 s, ferry with 32 MiB 0.36 s), and issue 58 measured 1 MiB at 1.3x curl's time.
    /// Memory: the window fills only while the reader is slower than the server (a
    /// ``ResponseStream`` that is full delays the grant); to ext4 and to tmpfs the peak RSS
    /// was 22-29 MiB with 1, 10 and 32 MiB.
    static let streamSize = 10 << 20
    /// What a connection may have in flight, over all its streams: ten streams' windows,
    /// granted again as frames arrive (so it bounds the bytes on the wire, not memory), as
    /// curl sizes its connection window from its streams'.
    static let connectionSize = 10 * streamSize

    /// The window kept open: what may be in flight at most.
    let size: Int
    /// What the server may still send.
    private(set) var available: Int
    /// Taken and not yet granted again.
    private var ungranted = 0

    /// - Parameters:
    ///   - size: the window kept open.
    ///   - available: what the server may send at first (``size`` unless an update raising
    ///     the protocol's initial 65,535 bytes is still to be sent).
    init(size: Int, available: Int? = nil) {
        self.size = size
        self.available = available ?? size
    }

    /// A frame of `length` flow-controlled bytes arrived.
    ///
    /// - Returns: `false` when the server sent more than it was allowed (the window is left
    ///   as it was).
    mutating func received(_ length: Int) -> Bool {
        guard length <= available else { return false }
        available -= length
        return true
    }

    /// `count` received bytes were taken.
    ///
    /// - Returns: the increment of the `WINDOW_UPDATE` to send now, if one is due.
    mutating func taken(_ count: Int) -> Int? {
        ungranted += count
        guard ungranted >= size / 2, ungranted > 0 else { return nil }
        defer {
            available += ungranted
            ungranted = 0
        }
        return ungranted
    }
}
