public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response kept by a ``ResponseCache``: its head, its body, and when it was received
/// (URLSession's `CachedURLResponse`).
public struct CachedResponse: Sendable, Codable, Equatable {
    /// The URL the response answered.
    public var url: URL
    /// The response's status code.
    public var statusCode: Int
    /// The response's reason phrase.
    public var reasonPhrase: String
    /// The response's header fields, in order.
    public var headerFields: [[String]]
    /// The whole response body.
    public var body: Data
    /// The request's values of the fields the response `Vary`s on (names lowercased).
    public var varyingRequestFields: [String: String]
    /// When the request was sent and the response received (RFC 9111 §4.2.3).
    public var requestTime: Date
    /// When the response was received (its age is counted from here, RFC 9111 §4.2.3).
    public var responseTime: Date

    init(response: HTTPResponse, body: Data, request: URLRequest, requestTime: Date, responseTime: Date) {
        url = response.url
        statusCode = response.statusCode
        reasonPhrase = response.reasonPhrase
        headerFields = response.headers.fields.map { [$0.name, $0.value] }
        self.body = body
        varyingRequestFields = [:]
        for name in CacheRules.varyNames(response.headers) {
            varyingRequestFields[name] = request.value(forHTTPHeaderField: name) ?? ""
        }
        self.requestTime = requestTime
        self.responseTime = responseTime
    }

    /// The response as a task delivers it.
    public var response: HTTPResponse {
        HTTPResponse(
            url: url,
            statusCode: statusCode,
            reasonPhrase: reasonPhrase,
            headers: HeaderFields(headerFields.compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil }),
            httpVersion: "HTTP/1.1"
        )
    }

    /// This response updated by a `304` (RFC 9111 §4.3.4): the 304's fields replace the
    /// stored ones of the same name; the body stays.
    func freshened(by notModified: HTTPResponse, requestTime: Date, responseTime: Date) -> CachedResponse {
        var updated = self
        var headers = response.headers
        let skip: Set<String> = ["content-length", "content-encoding", "transfer-encoding", "content-range"]
        for (name, _) in notModified.headers.fields where !skip.contains(name.lowercased()) {
            let values = notModified.headers.values(for: name)
            headers[name] = nil
            for value in values { headers.add(name: name, value: value) }
        }
        updated.headerFields = headers.fields.map { [$0.name, $0.value] }
        updated.requestTime = requestTime
        updated.responseTime = responseTime
        return updated
    }
}
