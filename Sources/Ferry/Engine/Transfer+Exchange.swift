import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOSSL
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request on the wire: the AsyncHTTPClient request for it (through the TLS bridge
/// when it needs one) and its response head.
extension Transfer {
    /// Sends one request and waits for its response head, through ``ResponseStream`` (the
    /// event loop reads ahead); a body streams from ``CountingChunks`` through the stream's
    /// ``RequestBodyPump``, which ends it with its last byte.
    func exchange(
        _ request: URLRequest,
        body: RequestBody?
    ) async throws -> Exchange {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false
        else {
            throw FerryError(.invalidURL, "'\(request.url?.absoluteString ?? "")' is not an http(s) URL with a host.")
        }
        let method = NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue)
        var headers = try headers(for: request)
        // Data and upload tasks may have their bodies decoded; downloads to files never: they
        // store the bytes as sent (`Transfer.request(_:for:)` asks for identity unless the
        // request names a coding itself).
        let decompressing: Bool
        if case .download = origin.plan {
            decompressing = decodesDownload.load(ordering: .relaxed)
        } else {
            decompressing = configuration.automaticDecompression
        }
        if decompressing, !headers.contains(name: "Accept-Encoding") {
            headers.add(name: "Accept-Encoding", value: "gzip, deflate")
        }
        let route = try await engine.route(url)
        if let host = route.host, !headers.contains(name: "Host") { headers.add(name: "Host", value: host) }
        // A bridged request names itself, so the bridge can say which connection it took.
        let trace = route.bridged ? engine.bridge?.makeTrace() : nil
        if let trace { headers.replaceOrAdd(name: BridgeRelay.traceField, value: trace) }
        do {
            let client = engine.client(for: url, decompressing: decompressing, bridged: route.bridged)
            let tls = route.bridged ? nil : engine.tls.override(for: url)
            let (head, responseBody, stream) = try await exchange(
                method,
                headers,
                body,
                route: route,
                client: client,
                tls: tls
            )
            return Exchange(
                head: head,
                body: responseBody,
                stream: stream,
                connection: trace.flatMap { engine.bridge?.connection(for: $0) }
            )
        } catch {
            // A connection the TLS bridge refused reaches the client as a closed one.
            if route.bridged, let failure = engine.bridge?.failure(for: Origin(url)) { throw failure }
            throw error
        }
    }

    /// A response head, its body, and what is known of the way it came.
    struct Exchange {
        var head: HTTPResponseHead
        var body: ResponseBody
        /// The stream the response came through, which knows when the request was sent.
        var stream: ResponseStream
        /// Set for requests that went through the bridge.
        var connection: BridgedConnection?
    }

    func exchange(
        _ method: NIOHTTP1.HTTPMethod,
        _ headers: HTTPHeaders,
        _ body: RequestBody?,
        route: (url: URL, host: String?, bridged: Bool),
        client: HTTPClient,
        tls tlsConfiguration: TLSConfiguration?
    ) async throws -> (head: HTTPResponseHead, body: ResponseBody, stream: ResponseStream) {
        let task = origin
        let stream = ResponseStream(onActivity: { task.touch() })
        var requestBody: HTTPClient.Body?
        if let body {
            let chunks = CountingChunks(base: body.chunks(), task: task, length: body.length)
            let pump = stream.pump
            let eventLoop = client.eventLoopGroup.any()
            requestBody = .stream(contentLength: body.length) { writer in
                pump.start(chunks, length: body.length, writer: writer, on: eventLoop)
            }
        }
        stream.start(
            try HTTPClient.Request(
                url: route.url,
                method: method,
                headers: headers,
                body: requestBody,
                tlsConfiguration: tlsConfiguration
            ),
            on: client
        )
        do {
            return (try await stream.head(), ResponseBody(stream), stream)
        } catch {
            stream.abandon()
            throw error
        }
    }

    /// The request's header fields after the session's, without framing headers (the client
    /// sets those from the body); CR, LF and NUL are refused.
    func headers(for request: URLRequest) throws -> HTTPHeaders {
        var headers = HTTPHeaders()
        let own = request.allHTTPHeaderFields ?? [:]
        let ownNames = Set(own.keys.map { $0.lowercased() })
        var fields: [(String, String)] = configuration.httpAdditionalHeaders
            .filter { !ownNames.contains($0.key.lowercased()) }
            .sorted { $0.key < $1.key }
            .map { ($0.key, $0.value) }
        fields += own.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        for (name, value) in fields {
            let lower = name.lowercased()
            if lower == "content-length" || lower == "transfer-encoding" { continue }
            guard Self.isValidHeader(name: name, value: value) else {
                throw FerryError(.invalidRequest, "The header '\(name)' has a name or value with CR, LF or NUL.")
            }
            headers.add(name: name, value: value)
        }
        return headers
    }

    static func isValidHeader(name: String, value: String) -> Bool {
        guard !name.isEmpty else { return false }
        let forbidden: Set<UInt8> = [0x0D, 0x0A, 0x00]
        if name.utf8.contains(where: { forbidden.contains($0) || $0 == 0x20 || $0 == UInt8(ascii: ":") }) {
            return false
        }
        return !value.utf8.contains(where: { forbidden.contains($0) })
    }
}
