public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// What a task's requests took, delivered once when it completes
/// (``SessionDelegate/session(_:task:didFinishCollecting:)``, ``TaskEvent/finishedCollectingMetrics(_:)``,
/// ``SessionTask/metrics``): URLSession's `URLSessionTaskMetrics`.
public struct TaskMetrics: Sendable {
    /// One per request sent, in order: redirects, answered challenges, retries and a
    /// download's range requests each add one.
    public var transactions: [TransactionMetrics]
    /// From `resume()` to completion.
    public var taskInterval: DateInterval
    /// How many redirects were followed.
    public var redirectCount: Int {
        transactions.filter { $0.reason == .redirect }.count
    }
}

/// One request and its response within a task (URLSession's
/// `URLSessionTaskTransactionMetrics`).
///
/// Dates are taken on the way: ``fetchStartDate`` when the request is about to wait for a
/// connection slot, ``requestStartDate`` when it is handed to the connection,
/// ``requestEndDate`` when its last byte was written, ``responseStartDate`` when the response
/// head arrived, ``responseEndDate`` when the body was read (or the request failed).
/// The connection fields (``connectStartDate`` … ``isReusedConnection``) are filled when
/// the session collects them (``SessionConfiguration/collectsConnectionMetrics``, or a host
/// Ferry verifies itself) and for requests over the HTTP/2 connections Ferry keeps itself;
/// AsyncHTTPClient does not report them, so otherwise they are `nil`. As in URLSession, a
/// reused connection has no connection dates, and ``connectEndDate`` comes after the TLS
/// handshake.
public struct TransactionMetrics: Sendable {
    /// Why this request was sent. Later versions may add reasons: switch with an
    /// `@unknown default`.
    @nonexhaustive(warn)
    public enum Reason: String, Sendable, Equatable {
        /// The task's first request.
        case initial
        /// To follow a redirect.
        case redirect
        /// The same request with credentials, after a challenge.
        case authentication
        /// Again, as an interceptor decided.
        case retry
        /// A download asking for more (a range after an interruption or a short answer).
        case resume
    }

    /// The request as sent.
    public var request: URLRequest
    /// The response, when one arrived.
    public var response: HTTPResponse?
    /// Why this request was made: the task's own, a redirect, a retry, an authentication.
    public var reason: Reason
    /// When the request was started.
    public var fetchStartDate: Date
    /// When the first byte of the request was written.
    public var requestStartDate: Date?
    /// When the last byte of the request was written.
    public var requestEndDate: Date?
    /// When the first byte of the response arrived.
    public var responseStartDate: Date?
    /// When the last byte of the response arrived.
    public var responseEndDate: Date?
    /// Request body bytes sent.
    public var countOfRequestBodyBytesSent: Int64
    /// Response body bytes received, as they came over the wire (still encoded).
    public var countOfResponseBodyBytesReceived: Int64
    /// `http/1.1` or `h2`, once a response arrived.
    public var networkProtocolName: String?
    /// When the connection to the origin (or its proxy) began; `nil` for a reused one.
    public var connectStartDate: Date?
    /// When the connection was ready for the request, TLS included.
    public var connectEndDate: Date?
    /// When the TLS handshake began and ended (`https` over a new connection).
    public var secureConnectionStartDate: Date?
    /// When the TLS handshake ended.
    public var secureConnectionEndDate: Date?
    /// Whether an earlier request had used the connection; `nil` when unknown.
    public var isReusedConnection: Bool?
    /// The address connected to (the origin, or the proxy).
    public var remoteAddress: String?
    /// The local address of the connection.
    public var localAddress: String?
}

extension TransactionMetrics {
    /// Takes in what the bridge knew of the request's connection.
    mutating func record(_ connection: ConnectionRecord) {
        isReusedConnection = connection.reused
        remoteAddress = connection.remoteAddress
        localAddress = connection.localAddress
        guard !connection.reused else { return }
        connectStartDate = connection.connectStart
        secureConnectionStartDate = connection.secureConnectionStart
        secureConnectionEndDate = connection.secureConnectionEnd
        connectEndDate = connection.secureConnectionEnd ?? connection.connectEnd
        // The request could not leave for the origin before its connection was ready (the
        // client's write to the bridge may have come earlier).
        if let ready = connectEndDate {
            if let start = requestStartDate, start < ready { requestStartDate = ready }
            if let end = requestEndDate, end < ready { requestEndDate = ready }
        }
    }
}
