import Foundation
import NIOCore
import NIOHTTP1

/// Answers one request. Returns whether the connection may be kept open.
struct Responder {
    let server: FerryTestServer
    let request: TestRequest
    let outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>

    static let lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"
    static let chunkSize: Int64 = 64 * 1024

    func respond() async throws -> Bool {
        if let delay = request.queryInt("delay"), delay > 0 {
            try await Task.sleep(for: .milliseconds(delay))
        }
        // fail-first=N: the first N requests for this URI (without fail-first's own effect on
        // other URIs) answer `fail-status` (default 503), with `retry-after` if given.
        if let failFirst = request.queryInt("fail-first") {
            let seen = server.failures.withLock { failures in
                defer { failures[request.head.uri, default: 0] += 1 }
                return failures[request.head.uri, default: 0]
            }
            if seen < failFirst {
                let code = Int(request.queryInt("fail-status") ?? 503)
                var headers: [(String, String)] = [("Content-Type", "text/plain")]
                if let after = request.query["retry-after"] { headers.append(("Retry-After", after)) }
                return try await send(
                    HTTPResponseStatus(statusCode: code),
                    headers: headers,
                    body: Data("try again\n".utf8)
                )
            }
        }
        let segments = request.path.split(separator: "/").map(String.init)
        switch segments.first {
        case "bytes", "file":
            guard segments.count >= 2, let size = Int64(segments[1]), size >= 0 else {
                return try await text(.badRequest, "usage: /bytes/SIZE\n")
            }
            return try await content(size: size, name: segments.count >= 3 ? segments[2] : nil)
        case "versioned":
            guard segments.count >= 2, let version = server.versions.withLock({ $0[segments[1]] }) else {
                return try await text(.notFound, "no such versioned resource\n")
            }
            return try await content(size: version.size, name: nil, seed: version.seed)
        case "status":
            let code = segments.count >= 2 ? Int(segments[1]) ?? 400 : 400
            return try await text(HTTPResponseStatus(statusCode: code), "status \(code)\n")
        case "sink":
            var report: [String: Any] = [:]
            if let parts = request.parts { report["parts"] = parts.map(\.json) }
            if let error = request.multipartError { report["multipartError"] = error }
            return try await json(
                .ok,
                report.merging([
                    "bytes": request.bodyLength, "sha256": request.bodySHA256,
                    "method": request.method.rawValue,
                    "contentType": request.headers.first(name: "content-type") ?? "",
                    "chunked": request.headers.first(name: "transfer-encoding")?.lowercased() == "chunked",
                    "contentLength": request.headers.first(name: "content-length").flatMap { Int64($0) } ?? -1,
                ]) { first, _ in first }
            )
        case "echo":
            return try await json(
                .ok,
                [
                    "method": request.method.rawValue,
                    "uri": request.head.uri,
                    "headers": request.headers.map { [$0.name, $0.value] },
                    "body": String(decoding: request.body, as: UTF8.self),
                    "bodyLength": request.bodyLength,
                ]
            )
        case "redirect":
            return try await redirect(segments)
        case "loop":
            // /loop/a ⇄ /loop/b forever.
            let next = segments.count >= 2 && segments[1] == "a" ? "/loop/b" : "/loop/a"
            return try await send(.found, headers: [("Location", next)], body: nil)
        case "redirect-to":
            let status = HTTPResponseStatus(statusCode: Int(request.query["status"] ?? "302") ?? 302)
            return try await send(status, headers: [("Location", request.query["url"] ?? "/")], body: nil)
        case "basic-auth":
            return try await basicAuth(segments)
        case "cookies":
            return try await cookies(segments)
        case "cached":
            return try await cached(segments)
        case "gzip":
            // /gzip/SIZE[?zeros]: SIZE bytes (test content, or zeros), compressed when the
            // client accepts gzip or deflate.
            let size = segments.count >= 2 ? Int(segments[1]) ?? 1024 : 1024
            let body = request.flag("zeros") ? Data(count: size) : TestContent.data(size: Int64(size))
            // No Content-Length: the compressor sends the head before it knows the
            // compressed length, so the body goes chunked.
            try await outbound.write(
                .head(head(.ok, [(FerryTestServer.compressMarker, "1"), ("Content-Type", "application/octet-stream")]))
            )
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
            try await outbound.write(.end(nil))
            return true
        case "many-headers":
            // /many-headers?count=N&size=BYTES: N fields X-Filler-i, each value BYTES long.
            let count = Int(request.queryInt("count") ?? 10)
            let size = Int(request.queryInt("size") ?? 10)
            let fields = (0..<count).map { ("X-Filler-\($0)", String(repeating: "f", count: size)) }
            return try await send(.ok, headers: fields, body: Data("ok\n".utf8))
        case "digest-auth":
            return try await digestAuth(segments)
        case "bearer":
            // /bearer/TOKEN: 200 for "Authorization: Bearer TOKEN", else 401 (after
            // `delay` ms, so that many requests can be refused at once).
            let token = segments.count >= 2 ? segments[1] : "token"
            if let delay = request.queryInt("delay"), request.headers.first(name: "authorization") != "Bearer \(token)"
            {
                try await Task.sleep(for: .milliseconds(Int(delay)))
            }
            if request.headers.first(name: "authorization") == "Bearer \(token)" {
                return try await json(.ok, ["authenticated": true, "token": token])
            }
            return try await send(
                .unauthorized,
                headers: [("WWW-Authenticate", "Bearer realm=\"ferry\""), ("Content-Type", "text/plain")],
                body: Data("token required\n".utf8)
            )
        case "stats":
            let stats = server.connectionStats
            return try await json(.ok, ["current": stats.current, "peak": stats.peak, "total": stats.total])
        case "drip":
            let size = request.queryInt("bytes") ?? 1024
            return try await content(size: size, name: nil)
        default:
            return try await text(.notFound, "no route for \(request.path)\n")
        }
    }

    // MARK: Content with ranges, validators and faults

    /// Serves deterministic content. Query options: `seed`, `etag=none|weak`, `lastmod=none`,
    /// `ignore-range`, `short206=N`, `empty206` (a valid `Content-Range` and no body),
    /// `close-after=N`, `stall-at=N` (to a request without Range:
    /// send nothing from byte N on, until the client leaves), `lie-length=N`, `drip=N&interval=MS`,
    /// `type=`, `filename=`, `disposition=` (raw header), `chunked` (no Content-Length).
    private func content(size: Int64, name: String?, seed fixedSeed: UInt64? = nil) async throws -> Bool {
        let seed = fixedSeed ?? UInt64(request.queryInt("seed") ?? 0)
        var headers: [(String, String)] = [("Accept-Ranges", "bytes")]
        let etag = "\"\(String(size, radix: 16))-\(String(seed, radix: 16))\""
        switch request.query["etag"] {
        case "none": break
        case "weak": headers.append(("ETag", "W/" + etag))
        default: headers.append(("ETag", etag))
        }
        // Last-Modified is strong when Date is at least a second later (RFC 9110 §8.8.2.2);
        // lastmod=recent makes them equal, so a client must treat it as weak.
        let now = Self.httpDate(Date())
        headers.append(("Date", now))
        switch request.query["lastmod"] {
        case "none": break
        case "recent": headers.append(("Last-Modified", now))
        default: headers.append(("Last-Modified", Self.lastModified))
        }
        if let coding = request.query["encoding"] { headers.append(("Content-Encoding", coding)) }
        headers.append(("Content-Type", request.query["type"] ?? "application/octet-stream"))
        if let filename = request.query["filename"] {
            headers.append(("Content-Disposition", "attachment; filename=\"\(filename)\""))
        }
        if let disposition = request.query["disposition"] { headers.append(("Content-Disposition", disposition)) }

        var range: Range<Int64> = 0..<size
        var status = HTTPResponseStatus.ok
        var empty = false
        if !request.flag("ignore-range") && ifRangeMatches(etag: etag, weak: request.query["etag"] == "weak") {
            switch ByteRangeRequest(header: request.headers.first(name: "range"), size: size) {
            case .full:
                break
            case .unsatisfiable:
                return try await send(
                    .rangeNotSatisfiable,
                    headers: headers + [("Content-Range", "bytes */\(size)")],
                    body: nil
                )
            case .partial(let requested):
                range = requested
                if let short = request.queryInt("short206"), short > 0, short < range.count {
                    range = range.lowerBound..<(range.lowerBound + short)
                }
                // range-early=N: start N bytes before what was asked (valid, but overlapping).
                if let early = request.queryInt("range-early"), early > 0 {
                    range = max(0, range.lowerBound - early)..<range.upperBound
                }
                status = .partialContent
                let contentRange =
                    request.flag("bad-content-range")
                    ? "bytes \(range.lowerBound)-oops/\(size)"
                    : "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(size)"
                headers.append(("Content-Range", contentRange))
                empty = request.flag("empty206")
            }
        }
        let announced = empty ? 0 : request.queryInt("lie-length") ?? Int64(range.count)
        if !request.flag("chunked") { headers.append(("Content-Length", String(announced))) }
        try await outbound.write(.head(head(status, headers)))
        if request.method == .HEAD || empty {
            try await outbound.write(.end(nil))
            return true
        }
        let closeAfter = request.queryInt("close-after")
        // A range (a resume) is never held up.
        let stallAt = request.headers.first(name: "range") == nil ? request.queryInt("stall-at") : nil
        let drip = request.queryInt("drip")
        let interval = request.queryInt("interval") ?? 100
        var offset = range.lowerBound
        var sent: Int64 = 0
        while offset < range.upperBound {
            var chunk = drip.map { max(1, $0) } ?? Self.chunkSize
            chunk = min(chunk, range.upperBound - offset)
            if let closeAfter { chunk = min(chunk, closeAfter - sent) }
            if chunk <= 0 { return false }
            if let stallAt, offset < stallAt { chunk = min(chunk, stallAt - offset) }
            if let stallAt, offset == stallAt {
                try await stallUntilTheClientLeaves()
                return false
            }
            var buffer = ByteBufferAllocator().buffer(capacity: Int(chunk))
            TestContent.write(offset..<(offset + chunk), seed: seed, into: &buffer)
            try await outbound.write(.body(.byteBuffer(buffer)))
            offset += chunk
            sent += chunk
            if drip != nil { try await Task.sleep(for: .milliseconds(interval)) }
        }
        if let closeAfter, sent >= closeAfter, offset < range.upperBound { return false }
        if announced != Int64(range.count) { return false }
        try await outbound.write(.end(nil))
        return true
    }

    /// Sends nothing more until the client closes the connection (at most two minutes):
    /// an empty write every 20 ms notices when it has.
    private func stallUntilTheClientLeaves() async throws {
        for _ in 0..<6000 {
            try await Task.sleep(for: .milliseconds(20))
            try await outbound.write(.body(.byteBuffer(ByteBuffer())))
        }
    }

    /// RFC 9110 §13.1.5: a Range is honoured only if If-Range is absent or matches the
    /// current representation by strong comparison (a weak tag never matches).
    private func ifRangeMatches(etag: String, weak: Bool) -> Bool {
        guard let ifRange = request.headers.first(name: "if-range")?.trimmingCharacters(in: .whitespaces) else {
            return true
        }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") {
            return !weak && !ifRange.hasPrefix("W/") && ifRange == etag && request.query["etag"] != "none"
        }
        return ifRange == Self.lastModified && request.query["lastmod"] != "none"
    }

    /// `/early?status=S`: the response is sent as soon as the head arrives, without reading
    /// the body, and the connection is closed.
    static func early(
        _ head: HTTPRequestHead,
        outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    ) async throws {
        let (_, query) = RequestReader.parse(uri: head.uri)
        let status = HTTPResponseStatus(statusCode: Int(query["status"] ?? "413") ?? 413)
        let body = ByteBuffer(string: "rejected early\n")
        let headers = HTTPHeaders([
            ("Content-Type", "text/plain"), ("Content-Length", String(body.readableBytes)), ("Connection", "close"),
        ])
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers)))
        try await outbound.write(.body(.byteBuffer(body)))
        try await outbound.write(.end(nil))
    }

    static func httpDate(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: date)
    }
}
