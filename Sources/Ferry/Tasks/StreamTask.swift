public import Foundation

/// A TCP connection as a task, like `URLSessionStreamTask`: read and write bytes, close
/// either direction, and start TLS on it when the protocol says so (STARTTLS).
///
/// Made by ``Session/streamTask(withHostName:port:)``, suspended; ``SessionTask/resume()`` connects
/// (within the session's ``SessionConfiguration/timeoutIntervalForRequest``). Reads and
/// writes made before the connection exists wait for it. The task completes when the
/// connection closes: the peer closed it, both ``closeRead()`` and ``closeWrite()`` were
/// called, or the task was cancelled; it fails when the connection could not be made or
/// broke.
///
/// Reading is back-pressured: at most 1 MiB is buffered unread, then the peer is slowed by
/// TCP until the task is read from again.
///
/// ```swift
/// let task = session.streamTask(withHostName: "mail.example.org", port: 587)
/// task.resume()
/// try await task.write(Data("STARTTLS\r\n".utf8), timeout: 10)
/// let (reply, _) = try await task.read(minLength: 1, maxLength: 4096, timeout: 10)
/// try await task.startSecureConnection()
/// ```
///
/// Not here: `captureStreams()` (Foundation on Linux has no socket-backed `InputStream` /
/// `OutputStream` to hand out) and `streamTask(with: NetService)` (Bonjour is Apple's); a
/// stream task connects directly, not through the session's proxy (a `CONNECT` data task
/// through it becomes a stream task instead).
public final class StreamTask: SessionTask, @unchecked Sendable {
    var connection: StreamConnection? {
        if case .socket(let connection) = plan { return connection }
        return nil
    }

    /// Reads at least `minLength` and at most `maxLength` bytes, or fewer at the end of
    /// input.
    ///
    /// - Parameters:
    ///   - minLength: Bytes to wait for (0 waits for any byte).
    ///   - maxLength: The most bytes to return; more than 0.
    ///   - timeout: Seconds to wait; 0 waits as long as it takes.
    /// - Returns: The bytes, and whether input has ended (nothing more will come).
    /// - Throws: ``FerryError`` `.timedOut(.idle)` when nothing came in time (the stream goes
    ///   on: read again), `.network` when the connection broke, `.invalidRequest` when another
    ///   read is waiting.
    public func read(
        minLength: Int,
        maxLength: Int,
        timeout: TimeInterval
    ) async throws(FerryError) -> (
        Data, atEOF: Bool
    ) {
        guard let connection else { throw FerryError(.unsupportedConfiguration, "Not a stream task.") }
        let (data, atEOF) = try await connection.read(minLength: minLength, maxLength: maxLength, timeout: timeout)
        data.withUnsafeBytes { client.didReceive(data: $0, publishData: false) }
        return (data, atEOF)
    }

    /// Writes `data`, returning once it is handed to the operating system (so a peer that
    /// does not read slows the writer down).
    ///
    /// - Parameters:
    ///   - data: The bytes to send.
    ///   - timeout: Seconds the write may take; 0 for no limit. Cancelling the calling Swift
    ///     task ends the wait too, with ``FerryError/Reason/cancelled``; after either, the
    ///     bytes may still go out.
    public func write(_ data: Data, timeout: TimeInterval) async throws(FerryError) {
        guard let connection else { throw FerryError(.unsupportedConfiguration, "Not a stream task.") }
        try await connection.write(data, timeout: timeout)
        client.didMove(.sent, bytes: Int64(data.count), publish: false, unpublished: 0)
    }

    /// Closes the writing side after the writes made so far (the peer reads an end of input);
    /// reading goes on.
    ///
    /// Returns once the side is closed, or after the session's `timeoutIntervalForRequest`
    /// while a peer that does not read holds earlier writes up (the end of input then follows
    /// them), or when the calling Swift task is cancelled.
    public func closeWrite() async {
        await connection?.closeWrite(timeout: closingTimeout)
    }

    /// Closes the reading side; bytes that already arrived can still be read. Returns as
    /// ``closeWrite()`` does.
    public func closeRead() async {
        await connection?.closeRead(timeout: closingTimeout)
    }

    /// How long closing a side is waited for: the session's `timeoutIntervalForRequest`
    /// (Foundation's default once the session is gone).
    private var closingTimeout: TimeInterval {
        session?.configuration.timeoutIntervalForRequest ?? TransferOptions.foundationDefaultTimeout
    }

    /// Starts TLS on the connection (after a protocol's STARTTLS), verifying the server as the
    /// session verifies `https` hosts: its trust roots, its client identity, and a
    /// certificate pin for the host name. Returns once the handshake is done.
    ///
    /// The handshake may take the session's `timeoutIntervalForRequest`; cancelling the
    /// calling Swift task ends the wait too. Either way the connection is closed (a handshake
    /// left halfway leaves nothing to speak on) and the task completes with the reason.
    ///
    /// - Throws: ``FerryError/Reason/secureConnectionFailed`` when the server is not trusted;
    ///   ``FerryError/Reason/timedOut(_:)`` when the server does not finish the handshake in
    ///   time; ``FerryError/Reason/cancelled`` when the calling Swift task is cancelled.
    public func startSecureConnection() async throws(FerryError) {
        guard let connection, let session else { throw FerryError(.sessionInvalidated, "The session is gone.") }
        try await connection.startSecureConnection(
            session.engine.tls.configuration(forHost: connection.host),
            timeout: session.configuration.timeoutIntervalForRequest
        )
    }

    /// Ends TLS on the connection in order (`close_notify` sent and received) and goes on in
    /// plaintext, as URLSession's `stopSecureConnection()`.
    ///
    /// The peer's `close_notify` is awaited for the session's `timeoutIntervalForRequest` or
    /// TLS's own close timeout (`TLSConfiguration.shutdownTimeout`, 5 s), whichever is
    /// shorter; cancelling the calling Swift task ends the wait too. Either way the connection
    /// is closed (TLS closed on one side only leaves nothing to speak on) and the task
    /// completes.
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` when TLS was never started;
    ///   ``FerryError/Reason/timedOut(_:)`` when the peer does not answer in time;
    ///   ``FerryError/Reason/cancelled`` when the calling Swift task is cancelled.
    public func stopSecureConnection() async throws(FerryError) {
        guard let connection, let session else { throw FerryError(.sessionInvalidated, "The session is gone.") }
        try await connection.stopSecureConnection(timeout: session.configuration.timeoutIntervalForRequest)
    }
}
