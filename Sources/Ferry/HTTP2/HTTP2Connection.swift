import Foundation
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import Synchronization

/// One HTTP/2 connection of Ferry's own (see ``HTTP2Pool``): requests without a body go out
/// as streams of it, each response into its ``ResponseStream``.
///
/// Why not AsyncHTTPClient's: it gives every stream a child channel with a pipeline of its
/// own and turns every `DATA` frame into an HTTP/1 body part on its way through them; at
/// nginx's 8 KiB frames that is 131,072 trips per GiB, and a download over HTTP/2 took
/// twice curl's time on one saturated event loop. Here the frames stay on the connection's
/// pipeline: ``HTTP2Router`` hands each `DATA` frame's buffer, as it is, to its stream.
///
/// Lifecycle: made by the pool once the server's first `SETTINGS` arrived; ``start(_:into:)``
/// any number of times, from any thread; closed by the server, by a connection error, when
/// idle for the session's ``SessionConfiguration/connectionIdleTimeout``, or by
/// ``close()``. It tells the pool of every change through the router.
final class HTTP2Connection: Sendable {
    /// A request this connection could not send (it was going away or closed first):
    /// nothing reached the server, so the request may go again on another connection.
    struct NotStarted: Error, CustomStringConvertible {
        var underlying: (any Error)?
        var description: String {
            "The HTTP/2 connection closed before the request was sent" + (underlying.map { ": \($0)" } ?? ".")
        }
    }

    let number: Int
    let channel: any Channel
    /// How it was opened, for the metrics of its first request (later ones are `reused`).
    let record: ConnectionRecord
    private let router: NIOLoopBound<HTTP2Router>
    private let started = Atomic<Int>(0)

    init(number: Int, channel: any Channel, router: NIOLoopBound<HTTP2Router>, record: ConnectionRecord) {
        self.number = number
        self.channel = channel
        self.router = router
        self.record = record
    }

    /// Sends a request without a body as a new stream; its response goes into `stream`
    /// (which fails with ``NotStarted`` if the connection can no longer take it).
    ///
    /// - Returns: how the connection was opened, `reused` from its second request on.
    func start(_ headers: HPACKHeaders, into stream: ResponseStream) -> ConnectionRecord {
        let router = self.router
        channel.eventLoop.execute { router.value.open(headers, into: stream) }
        var record = self.record
        record.reused = started.wrappingAdd(1, ordering: .relaxed).oldValue > 0
        return record
    }

    func close() {
        channel.close(promise: nil)
    }

    /// The header block of a request to `url` (RFC 9113 §8.3.1): the pseudo-header fields
    /// first, then the fields in lowercase, without those HTTP/2 forbids (§8.2.2); the
    /// credentials never indexed by HPACK (RFC 7541 §7.1.3).
    static func headerBlock(method: NIOHTTP1.HTTPMethod, url: URL, fields: HTTPHeaders) -> HPACKHeaders {
        let bracketed = URL.authorityHost(url.host ?? "")
        let authority = fields.first(name: "Host") ?? (url.port.map { "\(bracketed):\($0)" } ?? bracketed)
        var block = HPACKHeaders()
        block.reserveCapacity(fields.count + 4)
        block.add(name: ":method", value: method.rawValue)
        block.add(name: ":scheme", value: url.scheme?.lowercased() ?? "https")
        block.add(name: ":authority", value: authority)
        block.add(name: ":path", value: url.requestTarget)
        for (name, value) in fields {
            let lower = name.lowercased()
            switch lower {
            case "host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
                continue
            case "te" where value.lowercased() != "trailers":
                continue
            case "authorization", "proxy-authorization", "cookie":
                block.add(name: lower, value: value, indexing: .neverIndexed)
            default:
                block.add(name: lower, value: value)
            }
        }
        return block
    }
}
