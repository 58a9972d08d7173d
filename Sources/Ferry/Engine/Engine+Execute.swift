import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL

extension Engine {
    /// One request as the engine takes it: nothing of tasks, sessions or policies.
    struct Outgoing {
        var method: NIOHTTP1.HTTPMethod
        /// An absolute `http` or `https` URL with a host.
        var url: URL
        /// `url`'s origin, worked out once by the caller (it parses the URL's parts again).
        var origin: Origin
        /// The fields to send, without framing (the client sets it from the body).
        var headers: HTTPHeaders
        /// The body, counted as the connection takes it, and its length when known.
        var body: CountingChunks?
        /// Whether a coded response body is decoded on the way in.
        var decompressing: Bool
        /// Which of a segmented download's connections it goes over; 0 for every other
        /// request (see ``Engine/client(for:decompressing:bridged:connection:)``).
        var connection = 0
        /// How long it may take to connect when that is longer than the session allows
        /// (``Engine/connectLimit(covering:)``); `nil` for the session's limit.
        var connectLimit: Int? = nil
        /// Told each interim (1xx) response before the answer, where the connection reports
        /// them (Ferry's own HTTP/2 connections).
        var onInformational: (@Sendable (HTTPResponseHead) -> Void)? = nil
    }

    /// A response head, its body, and what is known of the way it came.
    struct Exchange {
        var head: HTTPResponseHead
        var body: ResponseBody
        /// The stream the response came through, which knows when the request was sent.
        var stream: ResponseStream
        /// The connection it went over, for requests that went through the TLS bridge.
        var connection: ConnectionRecord?
        /// The request's fields as handed to the connection (the caller's, `Host` when the
        /// route names one, the bridge's trace field), which `-v` shows.
        var sentFields: HTTPHeaders
    }

    /// Sends one request and waits for its response head, through ``ResponseStream`` (the
    /// event loop reads ahead); a body streams through the stream's ``RequestBodyPump``,
    /// which ends it with its last byte.
    ///
    /// Which way the request goes is decided here and nowhere above: straight to
    /// AsyncHTTPClient, through the session's proxy, or through the ``TLSBridge`` for hosts
    /// Ferry verifies itself. A bridged request carries a trace field the bridge strips
    /// before it leaves this process, so the connection it took comes back in the exchange;
    /// a connection the bridge refused is reported as the bridge's error, not as the closed
    /// socket AsyncHTTPClient saw.
    ///
    /// - Parameter onActivity: Called whenever bytes move (the idle timeout's clock).
    func execute(_ request: Outgoing, onActivity: @escaping @Sendable () -> Void) async throws -> Exchange {
        var headers = request.headers
        let route = try await route(request.url, connectLimit: request.connectLimit)
        if let host = route.host, !headers.contains(name: "Host") { headers.add(name: "Host", value: host) }
        // A bridged request names itself, so the bridge can say which connection it took.
        let trace = route.bridged ? bridge?.makeTrace() : nil
        if let trace { headers.replaceOrAdd(name: BridgeRelay.traceField, value: trace) }
        // One origin for the limiter's counts; the loop and the pool's connection follow the
        // route (a bridged request's connection is to the bridge's socket).
        let origin = request.origin
        let routeOrigin = route.bridged ? Origin(route.url) : origin
        if !route.bridged,
            let exchange = try await executeOverHTTP2(request, headers: headers, origin: origin, onActivity: onActivity)
        {
            return exchange
        }
        do {
            let client = client(
                for: request.url,
                decompressing: request.decompressing,
                bridged: route.bridged,
                connection: request.connection,
                connectLimit: request.connectLimit
            )
            let stream = ResponseStream(
                readAhead: readAhead(for: origin),
                onActivity: onActivity,
                onInformational: request.onInformational
            )
            let eventLoop = eventLoop(for: routeOrigin)
            var body: HTTPClient.Body?
            if let chunks = request.body {
                let pump = stream.pump
                body = .stream(contentLength: chunks.length) { writer in
                    pump.start(chunks, length: chunks.length, writer: writer, on: eventLoop)
                }
            }
            stream.start(
                try HTTPClient.Request(
                    url: route.url,
                    method: request.method,
                    headers: headers,
                    body: body,
                    tlsConfiguration: route.bridged ? nil : tls.override(for: request.url)
                ),
                on: client,
                eventLoop: eventLoop,
                pinned: pinsConnection(for: routeOrigin)
            )
            let head: HTTPResponseHead
            do {
                head = try await stream.head()
            } catch {
                stream.abandon()
                throw error
            }
            noteVersion(head.version, of: routeOrigin)
            return Exchange(
                head: head,
                body: ResponseBody(stream),
                stream: stream,
                connection: trace.flatMap { bridge?.connection(for: $0) },
                sentFields: headers
            )
        } catch {
            // A connection the TLS bridge refused reaches the client as a closed one.
            if route.bridged, let failure = bridge?.failure(for: origin) { throw failure }
            throw error
        }
    }

    /// Sends `request` over one of Ferry's own HTTP/2 connections (``HTTP2Pool``) when it
    /// is one they carry: no body, `https`, not through a proxy, not decoded. `nil` when it
    /// is not, or when its origin chose HTTP/1.1: AsyncHTTPClient carries it then.
    ///
    /// A request the connection could not send (it was going away or closing first) goes
    /// again on another, twice at most: nothing of it reached the server.
    private func executeOverHTTP2(
        _ request: Outgoing,
        headers: HTTPHeaders,
        origin: Origin,
        onActivity: @escaping @Sendable () -> Void
    ) async throws -> Exchange? {
        guard let http2, request.body == nil, origin.scheme == "https",
            configuration.proxy?.applies(to: request.url) != true,
            !(request.decompressing && configuration.automaticDecompression)
        else { return nil }
        let block = HTTP2Connection.headerBlock(method: request.method, url: request.url, fields: headers)
        for attempt in 1...3 {
            let loop = eventLoop(for: origin)
            guard
                let connection = try await http2.connection(
                    for: request.url,
                    origin: origin,
                    slot: request.connection,
                    on: loop,
                    connectLimit: request.connectLimit
                )
            else { return nil }
            let stream = ResponseStream(
                readAhead: readAhead(for: origin),
                onActivity: onActivity,
                onInformational: request.onInformational
            )
            let record = connection.start(block, into: stream)
            do {
                let head = try await stream.head()
                noteVersion(head.version, of: origin)
                return Exchange(
                    head: head,
                    body: ResponseBody(stream),
                    stream: stream,
                    connection: record,
                    sentFields: headers
                )
            } catch is HTTP2Connection.NotStarted where attempt < 3 {
                stream.abandon()
            } catch {
                stream.abandon()
                throw error
            }
        }
        return nil
    }

    /// The `Proxy-Authorization` value for the proxy's `CONNECT`s from now on (after the
    /// proxy challenged one): the bridge makes them, so the engine passes it on.
    func setProxyAuthorization(_ value: String) {
        bridge?.setProxyAuthorization(value)
    }
}
