import Foundation

/// How a connection Ferry made itself was opened — the bridge's connection to an origin, or
/// a stream connection's: URLSession's connection fields of a transaction
/// (``TransactionMetrics/record(_:)``).
struct ConnectionRecord: Sendable, Equatable {
    var connectStart: Date
    var connectEnd: Date
    /// `nil` for plain `http`.
    var secureConnectionStart: Date?
    var secureConnectionEnd: Date?
    /// The origin's (or the proxy's) address, as connected.
    var remoteAddress: String?
    var localAddress: String?
    /// Whether an earlier request already used this connection.
    var reused: Bool
}
