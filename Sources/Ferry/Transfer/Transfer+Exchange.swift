import Foundation
import NIOCore
import NIOHTTP1

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request on the wire, as the task asks for it: its fields (the session's, the
/// request's, whether to accept a coded body) and its counted body, handed to
/// ``Engine/execute(_:onActivity:)``, which hides how it travels.
extension Transfer {
    /// - Parameters:
    ///   - connection: which of a segmented download's connections it goes over
    ///     (``HostLimiter/Lease/connection``).
    ///   - origin: the request URL's origin, when the caller has worked it out already.
    func exchange(
        _ request: URLRequest,
        body: RequestBody?,
        connection: Int = 0,
        origin known: Origin? = nil,
        decodesDownload: Bool = false
    ) async throws -> Engine.Exchange {
        guard let url = request.url else { throw FerryError(.invalidURL, "The request has no URL.") }
        let destination = known ?? Origin(url)
        guard destination.scheme == "http" || destination.scheme == "https", !destination.host.isEmpty else {
            throw FerryError(.invalidURL, "'\(url.absoluteString)' is not an http(s) URL with a host.")
        }
        var headers = try headers(for: request)
        // Data and upload tasks may have their bodies decoded; downloads to files never: they
        // store the bytes as sent, so they ask for them uncoded unless the request names a
        // coding itself (added here, not to the `URLRequest`: changing one copies it).
        let decompressing: Bool
        let isDownload: Bool
        if case .download = origin.plan {
            isDownload = true
            decompressing = decodesDownload
        } else {
            isDownload = false
            decompressing = configuration.automaticDecompression
        }
        if decompressing || isDownload, !headers.contains(name: "Accept-Encoding") {
            headers.add(name: "Accept-Encoding", value: decompressing ? ContentDecoder.acceptEncoding : "identity")
        }
        let task = origin
        let outgoing = Engine.Outgoing(
            method: NIOHTTP1.HTTPMethod(rawValue: request.method.rawValue),
            url: url,
            origin: destination,
            headers: headers,
            body: body.map { CountingChunks(base: $0.chunks(), task: task, length: $0.length, throttle: throttle) },
            decompressing: decompressing,
            connection: connection,
            connectLimit: engine.connectLimit(covering: options.idleTimeout),
            onInformational: { [logger] head in
                let interim = HTTPResponse(url: url, head: head)
                logger.logHead(of: interim)
                task.client.publish(.informationalResponse(interim))
            }
        )
        var exchange = try await engine.execute(outgoing) { task.client.touch() }
        exchange.body.throttle = throttle
        return exchange
    }

    /// The request's header fields after the session's, without framing headers (the client
    /// sets those from the body); CR, LF and NUL are refused.
    func headers(for request: URLRequest) throws -> HTTPHeaders {
        var headers = HTTPHeaders()
        let own = request.allHTTPHeaderFields ?? [:]
        var fields: [(String, String)] = []
        let additional = configuration.httpAdditionalHeaders
        if !additional.isEmpty {
            let ownNames = Set(own.keys.map { $0.lowercased() })
            fields = additional.filter { !ownNames.contains($0.key.lowercased()) }
                .sorted { $0.key < $1.key }
                .map { ($0.key, $0.value) }
        }
        fields += own.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        for (name, value) in fields {
            if HeaderFields.sameName(name, "Content-Length") || HeaderFields.sameName(name, "Transfer-Encoding") {
                continue
            }
            guard HeaderFields.isValid(name: name, value: value) else {
                throw FerryError(.invalidRequest, "The header '\(name)' has a name or value with CR, LF or NUL.")
            }
            headers.add(name: name, value: value)
        }
        return headers
    }
}

extension HeaderFields {
    /// Whether a field may be sent: a non-empty name without space, colon, CR, LF or NUL,
    /// and a value without CR, LF or NUL (no header injection).
    static func isValid(name: String, value: String) -> Bool {
        guard !name.isEmpty else { return false }
        for byte in name.utf8 {
            switch byte {
            case 0x0D, 0x0A, 0x00, 0x20, UInt8(ascii: ":"): return false
            default: continue
            }
        }
        for byte in value.utf8 {
            switch byte {
            case 0x0D, 0x0A, 0x00: return false
            default: continue
            }
        }
        return true
    }
}
