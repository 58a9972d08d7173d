import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The response a request loop ends with, handed back to the transfer's driver: its head,
/// its body still to be read from the connection (or already buffered), and the metrics of
/// the hop that brought it, which stay open until the body is read.
///
/// Returned by ``Transfer/open(_:body:sentFrom:lease:decodesDownload:)``; the driver reads ``body`` and
/// feeds what it finds to its machine, then calls ``close(failure:)`` once. Noncopyable, so
/// one owner reads the body and ends the hop; a response dropped without ``close(failure:)``
/// is closed as it goes (its body abandoned, its hop recorded as ended without a failure),
/// so no path leaves a connection reading for nobody or a hop's metrics unrecorded.
///
/// Not thread-safe: one driver uses it from one Swift task.
struct FinalResponse: ~Copyable {
    /// The response head, its URL the one that answered (after redirects).
    let head: HTTPResponse
    /// The body, read once.
    let body: ResponseBody
    /// The request as it went out for this response (with the credentials, cookies and
    /// trace fields the loop added): what a cache judges the response by.
    let request: URLRequest
    /// What ends the hop's metrics and span; `nil` when they were ended already (an error
    /// response the interceptor declined, whose body was buffered while its hop ended).
    private let ending: HopEnding?
    /// Why the body was not read to its end, as ``close(failure:)`` was told.
    private var failure: FerryError?

    init(head: HTTPResponse, body: ResponseBody, request: URLRequest, ending: HopEnding?) {
        self.head = head
        self.body = body
        self.request = request
        self.ending = ending
    }

    /// Ends the exchange: the body is abandoned if unread, the hop's metrics and span are
    /// recorded with `failure`, why the body was not taken (`nil` when it was).
    consuming func close(failure: FerryError? = nil) {
        self.failure = failure
    }

    /// Runs `read` with the body and the head, then closes the response: with `read`'s
    /// error, as the transfer reports it, when it throws.
    consuming func read<Result>(_ read: (ResponseBody, HTTPResponse) async throws -> Result) async throws -> Result {
        do {
            let result = try await read(body, head)
            close()
            return result
        } catch {
            close(failure: ending?.transfer.ferryError(from: error))
            throw error
        }
    }

    deinit {
        body.abandon()
        ending?.end(bodyBytesReceived: body.bytesRead, failure: failure)
    }
}

/// What records one hop's end: its transaction's metrics in the task, and its span.
struct HopEnding {
    let transfer: Transfer
    var transaction: TransactionMetrics
    let span: TaskTelemetry.Request?
    /// Whether the hop sent a body (its count of bytes sent is then the task's).
    let sendsBody: Bool

    /// Records the hop as ended now, having received `bodyBytesReceived` bytes of body;
    /// `failure` is why no response, or no whole body, came.
    func end(bodyBytesReceived: Int64, failure: FerryError?) {
        var transaction = transaction
        transaction.responseEndDate = Date()
        transaction.countOfResponseBodyBytesReceived = bodyBytesReceived
        transaction.countOfRequestBodyBytesSent = sendsBody ? transfer.origin.countOfBytesSent : 0
        transfer.origin.client.record(transaction)
        if let span { transfer.telemetry?.endRequest(span, transaction: transaction, failure: failure) }
    }
}
