import Foundation
import NIOCore
import NIOSSL

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A data task whose request asks to leave HTTP: `Upgrade` (answered by `101 Switching
/// Protocols`, RFC 9110 §7.8) or `CONNECT` through the session's HTTP proxy (answered by a
/// `2xx`, RFC 9110 §9.3.6). AsyncHTTPClient cannot hand over a connection, so Ferry speaks
/// this one request itself on a ``StreamConnection``; on success the connection becomes a
/// ``StreamTask`` (`didBecome streamTask`, as URLSession's `didBecomeStreamTask`), otherwise
/// the response and its body complete the data task as any other would.
///
/// A value made by the transfer for such a request; it uses the transfer for the task,
/// the session and its configuration, and logs through it.
struct Upgrader: TransferPart {
    let transfer: Transfer
}

extension Upgrader {
    /// Whether `request` asks to leave HTTP.
    static func leavesHTTP(_ request: URLRequest) -> Bool {
        request.method == .connect || request.value(forHTTPHeaderField: "Upgrade") != nil
    }

    /// Sends `request` as the session sends any request — through its proxy, over TLS it
    /// verifies, with its cookies and headers, answering `401` challenges and following
    /// redirects as its policies say — and, once the server switches protocols, hands the
    /// connection to a ``StreamTask``.
    func upgrade(_ request: URLRequest) async throws -> TaskOutcome {
        let loop = RequestLoop(
            request: request,
            body: try RequestBody.of(request),
            reason: .initial,
            home: origin.originalRequest.url.map(Origin.init),
            intercepts: false,
            limits: RequestLoop.Limits(redirects: configuration.maximumRedirects)
        )
        // The request loop's one driver: redirects, challenges, the proxy's challenge and
        // their caps are decided as for any request; only the hop goes out differently.
        return try await transfer.drive(loop, lease: transfer.lease, sentFrom: 0) { hop, loop in
            try await send(hop, of: loop)
        } deliver: { _, _ in
            // An upgrade has no interceptor, so the loop never delivers a declined response.
            throw FerryError(.invalidRequest, "The upgrade's request loop delivered an interceptor's response.")
        }
    }

    /// Sends one hop on a connection of its own and says what came of it: the task's
    /// outcome (the connection handed to a stream task, or the response's body as data), or
    /// the event for the loop (a follow-up, or the proxy's challenge).
    private func send(_ hop: RequestLoop.Hop, of loop: RequestLoop) async throws -> HopOutcome<TaskOutcome> {
        let connecting = hop.request.method == .connect
        try await origin.client.waitWhilePaused()
        guard let url = hop.request.url else { throw FerryError(.invalidURL, "The request has no URL.") }
        let outgoing = transfer.outgoingRequest(of: hop, in: loop, to: url)
        // Each hop is a transaction of the task's metrics, as a request's hop is.
        var transaction = TransactionMetrics(
            request: outgoing,
            reason: hop.reason,
            fetchStartDate: Date(),
            countOfRequestBodyBytesSent: 0,
            countOfResponseBodyBytesReceived: 0
        )
        transaction.networkProtocolName = "http/1.1"
        defer {
            transaction.responseEndDate = Date()
            origin.client.record(transaction)
        }
        let connection: StreamConnection
        let exchanged: (head: ResponseHeadParser.Head, rest: ByteBuffer)
        do {
            connection = try makeConnection(for: outgoing)
            exchanged = try await exchange(outgoing, body: hop.body, on: connection, metrics: &transaction)
        } catch let challenge as ProxyChallenge {
            // The proxy's 407 surfaces from the connection as an error; here, at its one
            // boundary, it becomes the loop's event.
            let failure = FerryError.mapping(challenge)
            return .event(.failed(challenge, failure, responded: false, cancelled: Task.isCancelled))
        }
        let (parsed, rest) = exchanged
        let response = HTTPResponse(
            url: url,
            statusCode: parsed.statusCode,
            reasonPhrase: parsed.reasonPhrase,
            headers: HeaderFields(parsed.fields),
            httpVersion: parsed.version
        )
        transfer.logger.logHead(of: response)
        transaction.response = response
        configuration.cookieStore?.store(setCookieFields: response.headers.values(for: "Set-Cookie"), from: url)
        do {
            let switched = connecting ? (200..<300).contains(response.statusCode) : response.statusCode == 101
            if switched, let dataTask = origin as? DataTask {
                origin.client.didReceive(response: response)
                connection.unread(rest)
                guard origin.client.transferWillFinish() else { throw CancellationError() }
                try dataTask.continueAsStream(on: connection, in: session)
                return .final(.becameStreamTask)
            }
            var sent = hop
            sent.request = outgoing
            if !connecting, let followUp = try await transfer.followUp(after: response, of: sent, in: loop) {
                connection.close()
                return .event(.followUp(followUp))
            }
            origin.client.didReceive(response: response)
            let data = try await readBody(
                of: parsed,
                method: outgoing.method.rawValue,
                after: rest,
                from: connection
            )
            transaction.countOfResponseBodyBytesReceived = Int64(data.count)
            connection.close()
            guard origin.client.transferWillFinish() else { throw CancellationError() }
            return .final(.data(data))
        } catch {
            connection.close()
            throw error
        }
    }

    /// The connection for one hop: a `CONNECT` to the session's HTTP proxy itself; anything
    /// else to its origin as the session reaches it (``Engine/streamRoute(for:)``).
    private func makeConnection(for request: URLRequest) throws -> StreamConnection {
        guard let url = request.url, let host = url.host, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { throw FerryError(.invalidURL, "'\(request.url?.absoluteString ?? "")' is not an http(s) URL.") }
        guard request.method == .connect else {
            return StreamConnection(
                host: host,
                port: url.port ?? (scheme == "https" ? 443 : 80),
                route: try transfer.engine.streamRoute(for: url)
            )
        }
        guard let proxy = configuration.proxy, proxy.kind == .http, proxy.applies(to: url) else {
            throw FerryError(
                .unsupportedConfiguration,
                "A CONNECT request goes to the session's HTTP proxy, and none applies to \(host)."
            )
        }
        return StreamConnection(host: proxy.host, port: proxy.port)
    }

    /// Sends one hop's request head and body on `connection` (connecting it first) and reads
    /// the response head; the connection is closed when this throws.
    private func exchange(
        _ request: URLRequest,
        body: RequestBody?,
        on connection: StreamConnection,
        metrics transaction: inout TransactionMetrics
    ) async throws -> (head: ResponseHeadParser.Head, rest: ByteBuffer) {
        do {
            _ = try await connection.open(timeout: options.idleTimeout)
            if let url = request.url, url.scheme?.lowercased() == "https", request.method != .connect,
                case .direct = connection.route
            {
                try await connection.startSecureConnection(
                    transfer.engine.tls.configuration(forHost: connection.host),
                    timeout: options.idleTimeout
                )
            }
            if let record = connection.record { transaction.record(record) }
            origin.client.touch()
            transaction.requestStartDate = Date()
            transfer.logger.logHead(of: request)
            let length = body?.length
            try await connection.write(
                Data(try head(of: request, bodyLength: length, hasBody: body != nil).utf8),
                timeout: options.idleTimeout
            )
            if let body {
                transaction.countOfRequestBodyBytesSent = try await send(body, chunked: length == nil, on: connection)
            }
            transaction.requestEndDate = Date()
            let head = try await readHead(from: connection)
            transaction.responseStartDate = Date()
            return head
        } catch {
            connection.close()
            throw error
        }
    }

    /// The request head: its line, `Host`, the session's and the request's fields, and how
    /// the body is framed.
    private func head(of request: URLRequest, bodyLength: Int64?, hasBody: Bool) throws -> String {
        guard let url = request.url, let host = url.host else {
            throw FerryError(.invalidURL, "The request has no host.")
        }
        let scheme = url.scheme?.lowercased() ?? "http"
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        var head: String
        if request.method == .connect {
            head = "CONNECT \(Self.authority(host, port)) HTTP/1.1\r\nHost: \(Self.authority(host, port))\r\n"
            if let credential = configuration.proxy?.credential {
                head += "Proxy-Authorization: \(credential.authorization)\r\n"
            }
        } else {
            head = "\(request.method.rawValue) \(url.requestTarget) HTTP/1.1\r\n"
            if request.value(forHTTPHeaderField: "Host") == nil {
                let defaultPort = (scheme == "https" ? 443 : 80) == port
                head += "Host: \(defaultPort ? host : Self.authority(host, port))\r\n"
            }
        }
        for field in try transfer.headers(for: request) { head += "\(field.name): \(field.value)\r\n" }
        if let bodyLength {
            if bodyLength > 0 { head += "Content-Length: \(bodyLength)\r\n" }
        } else if hasBody {
            head += "Transfer-Encoding: chunked\r\n"
        }
        return head + "\r\n"
    }

    /// Writes `body` (as chunks when its length is unknown), counting it into the task's
    /// bytes sent and progress as a request's body is; returns how many bytes it wrote.
    private func send(_ body: RequestBody, chunked: Bool, on connection: StreamConnection) async throws -> Int64 {
        var sent: Int64 = 0
        for try await chunk in CountingChunks(
            base: body.chunks(),
            task: origin,
            length: body.length,
            throttle: transfer.throttle
        ) {
            sent += Int64(chunk.readableBytes)
            let bytes = Data(chunk.readableBytesView)
            if chunked {
                try await connection.write(
                    Data(String(bytes.count, radix: 16).utf8) + Data("\r\n".utf8) + bytes + Data("\r\n".utf8),
                    timeout: options.idleTimeout
                )
            } else {
                try await connection.write(bytes, timeout: options.idleTimeout)
            }
            origin.client.touch()
        }
        if chunked { try await connection.write(Data("0\r\n\r\n".utf8), timeout: options.idleTimeout) }
        return sent
    }

    private static func authority(_ host: String, _ port: Int) -> String {
        "\(URL.authorityHost(host)):\(port)"
    }

    /// The response head, and the bytes that came after it.
    private func readHead(from connection: StreamConnection) async throws -> (ResponseHeadParser.Head, ByteBuffer) {
        var parser = ResponseHeadParser(maximumSize: configuration.maximumResponseHeaderBytes)
        while true {
            if let head = try parser.head() { return (head, parser.remainder) }
            let (data, atEOF) = try await connection.read(
                minLength: 1,
                maxLength: 64 * 1024,
                timeout: options.idleTimeout
            )
            origin.client.touch()
            parser.append(ByteBuffer(bytes: data))
            if atEOF {
                guard let head = try parser.head() else {
                    throw FerryError(
                        .network,
                        "The server closed the connection before its response head was complete."
                    )
                }
                return (head, parser.remainder)
            }
        }
    }

    /// The body of a response that did not switch protocols, up to the in-memory limit.
    private func readBody(
        of head: ResponseHeadParser.Head,
        method: String,
        after start: ByteBuffer,
        from connection: StreamConnection
    ) async throws -> Data {
        let reader = UpgradeBodyReader(
            connection: connection,
            pending: start,
            limit: .memory(configuration.maximumInMemoryBodySize),
            timeout: options.idleTimeout
        ) { [origin] in origin.client.touch() }
        switch try ResponseHeadParser.framing(of: head, method: method) {
        case .none:
            break
        case .length(let length):
            while reader.body.count < length {
                if reader.pending.readableBytes == 0, !(try await reader.more()) {
                    throw FerryError(.network, "The body ended after \(reader.body.count) of \(length) bytes.")
                }
                try reader.take(min(reader.pending.readableBytes, Int(length) - reader.body.count))
            }
        case .untilClose:
            repeat { try reader.take(reader.pending.readableBytes) } while try await reader.more()
        case .chunked:
            while true {
                // A chunk's size line, then its bytes and CRLF; size 0 ends the body (the
                // trailer fields after it are read and dropped).
                let line = try await reader.line()
                let size = line.split(separator: ";").first.flatMap {
                    Int($0.trimmingCharacters(in: .whitespaces), radix: 16)
                }
                guard let size, size >= 0 else { throw FerryError(.badServerResponse, "A chunk size is malformed.") }
                if size == 0 {
                    while try await !reader.line().isEmpty {}
                    break
                }
                while reader.pending.readableBytes < size + 2 {
                    if !(try await reader.more()) { throw FerryError(.network, "The chunked body ended early.") }
                }
                try reader.take(size)
                reader.pending.moveReaderIndex(forwardBy: 2)
            }
        }
        return reader.body
    }
}

/// The bytes of a response body read from a ``StreamConnection``: what arrived and is not
/// taken yet, and the body taken so far, bounded. Used by one transfer, from one Swift task.
private final class UpgradeBodyReader {
    let connection: StreamConnection
    var pending: ByteBuffer
    private(set) var body = Data()
    let limit: BodyReader.SizeLimit
    let timeout: TimeInterval
    let activity: () -> Void

    init(
        connection: StreamConnection,
        pending: ByteBuffer,
        limit: BodyReader.SizeLimit,
        timeout: TimeInterval,
        activity: @escaping () -> Void
    ) {
        self.connection = connection
        self.pending = pending
        self.limit = limit
        self.timeout = timeout
        self.activity = activity
    }

    /// Reads more bytes; `false` at the end of input.
    func more() async throws -> Bool {
        let (data, atEOF) = try await connection.read(minLength: 1, maxLength: 64 * 1024, timeout: timeout)
        activity()
        pending.writeBytes(data)
        return !(atEOF && data.isEmpty)
    }

    /// Moves `count` pending bytes into the body.
    func take(_ count: Int) throws {
        try limit.check(Int64(body.count + count), head: nil)
        body.append(contentsOf: pending.readBytes(length: count) ?? [])
    }

    /// One line (without its CRLF) of a chunked body's framing.
    func line() async throws -> String {
        while true {
            let view = pending.readableBytesView
            if let newline = view.firstIndex(of: 10) {
                let line = String(decoding: view[view.startIndex..<newline], as: UTF8.self)
                pending.moveReaderIndex(forwardBy: newline - view.startIndex + 1)
                return line.hasSuffix("\r") ? String(line.dropLast()) : line
            }
            guard view.count < 8192 else { throw FerryError(.badServerResponse, "A chunked body's line is too long.") }
            if !(try await more()) { throw FerryError(.network, "The chunked body ended early.") }
        }
    }
}
