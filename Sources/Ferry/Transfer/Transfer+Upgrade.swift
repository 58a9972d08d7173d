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

    func upgrade(_ request: URLRequest) async throws -> TaskOutcome {
        guard let url = request.url, let host = url.host, let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else { throw FerryError(.invalidURL, "'\(request.url?.absoluteString ?? "")' is not an http(s) URL.") }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        let connecting = request.method == .connect
        let connection: StreamConnection
        var head = ""
        if connecting {
            guard let proxy = configuration.proxy, proxy.kind == .http, proxy.applies(to: url) else {
                throw FerryError(
                    .unsupportedConfiguration,
                    "A CONNECT request goes to the session's HTTP proxy, and none applies to \(host)."
                )
            }
            connection = StreamConnection(host: proxy.host, port: proxy.port)
            head += "CONNECT \(Self.authority(host, port)) HTTP/1.1\r\nHost: \(Self.authority(host, port))\r\n"
            if let credential = proxy.credential { head += "Proxy-Authorization: \(credential.authorization)\r\n" }
        } else {
            connection = StreamConnection(host: host, port: port)
            let target = url.requestTarget
            head += "\(request.method.rawValue) \(target) HTTP/1.1\r\n"
            if request.value(forHTTPHeaderField: "Host") == nil {
                let defaultPort = (scheme == "https" ? 443 : 80) == port
                head += "Host: \(defaultPort ? host : Self.authority(host, port))\r\n"
            }
        }
        var outgoing = request
        if let cookies = configuration.cookieStore, outgoing.value(forHTTPHeaderField: "Cookie") == nil,
            let value = cookies.headerValue(for: url)
        {
            outgoing.setValue(value, forHTTPHeaderField: "Cookie")
        }
        for field in try transfer.headers(for: outgoing) { head += "\(field.name): \(field.value)\r\n" }
        let body = request.httpBody ?? Data()
        if !body.isEmpty { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"

        do {
            _ = try await connection.open(timeout: options.idleTimeout)
            if scheme == "https" && !connecting {
                try await connection.startSecureConnection(transfer.engine.tls.configuration(forHost: host))
            }
            origin.touch()
            transfer.sentRequest.withLock { $0 = outgoing }
            transfer.logRequest(outgoing)
            try await connection.write(Data(head.utf8) + body, timeout: options.idleTimeout)
            let (parsed, rest) = try await readHead(from: connection)
            let response = HTTPResponse(
                url: url,
                statusCode: parsed.statusCode,
                reasonPhrase: parsed.reasonPhrase,
                headers: HeaderFields(parsed.fields),
                httpVersion: parsed.version
            )
            transfer.logResponse(response)
            configuration.cookieStore?.store(setCookieFields: response.headers.values(for: "Set-Cookie"), from: url)
            let switched = connecting ? (200..<300).contains(response.statusCode) : response.statusCode == 101
            guard switched, let dataTask = origin as? DataTask else {
                origin.didReceive(response: response)
                let data = try await readBody(
                    of: parsed,
                    method: request.method.rawValue,
                    after: rest,
                    from: connection
                )
                connection.close()
                guard origin.transferWillFinish() else { throw CancellationError() }
                return .data(data)
            }
            origin.didReceive(response: response)
            connection.unread(rest)
            guard origin.transferWillFinish() else { throw CancellationError() }
            try session.adoptStream(connection, from: dataTask)
            return .becameStreamTask
        } catch {
            connection.close()
            throw error
        }
    }

    private static func authority(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
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
            origin.touch()
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
            limit: configuration.maximumInMemoryBodySize,
            timeout: options.idleTimeout
        ) { [origin] in origin.touch() }
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
    let limit: Int64
    let timeout: TimeInterval
    let activity: () -> Void

    init(
        connection: StreamConnection,
        pending: ByteBuffer,
        limit: Int64,
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
        guard Int64(body.count + count) <= limit else {
            throw FerryError(.bodyTooLarge(limit: limit), "The response body is larger than \(limit) bytes.")
        }
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
