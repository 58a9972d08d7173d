public import Ferry
public import Foundation
public import HTTPTypes
public import OpenAPIRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `ClientTransport` for clients that swift-openapi-generator makes: each request goes
/// through a Ferry ``Ferry/Session``, with its redirects, credentials, proxies, TLS options,
/// interceptor, cookies, metrics and traces.
///
/// Both bodies stream: the request's is sent as the connection asks for it (chunked when its
/// length is unknown), and the response's is read from the connection only as fast as the
/// client reads it, so neither is held in memory whole. A request body the runtime can iterate
/// more than once (`iterationBehavior` `.multiple`) is sent again after a 307 or 308 redirect
/// or an authentication challenge; a one-shot body fails such a request with
/// ``Ferry/FerryError/Reason/bodyNotReplayable``.
///
/// ```swift
/// let client = Client(
///     serverURL: try Servers.Server1.url(),
///     transport: FerryTransport(session: try Session(configuration: .default))
/// )
/// ```
///
/// Every failure is a ``Ferry/FerryError`` (the runtime hands it to the caller as the
/// `ClientError`'s `underlyingError`); an error status is a response, as the generated
/// client expects.
public struct FerryTransport: ClientTransport {
    /// The session the requests go through.
    public let session: Session

    /// A transport over `session` (the shared one by default).
    ///
    /// - Parameter session: The session whose configuration the requests follow.
    public init(session: Session = .shared) {
        self.session = session
    }

    /// Sends `request` to `baseURL` joined with its path, and returns the response as soon as
    /// its head is in, its body streaming.
    ///
    /// - Parameters:
    ///   - request: The request: method, path (with its query) and header fields.
    ///   - body: The request's body, if any.
    ///   - baseURL: The server's URL, which the request's path is appended to.
    ///   - operationID: The OpenAPI operation (not sent).
    /// - Returns: The response's head, and its body (`nil` for a `HEAD` request, `204` and
    ///   `304`, which have none).
    /// - Throws: ``Ferry/FerryError`` when the URL cannot be formed or the request fails
    ///   before a response.
    public func send(
        _ request: HTTPTypes.HTTPRequest,
        body: HTTPBody?,
        baseURL: URL,
        operationID: String
    ) async throws -> (HTTPTypes.HTTPResponse, HTTPBody?) {
        let urlRequest = try Self.urlRequest(for: request, baseURL: baseURL)
        let (bytes, response): (ResponseBytes, Ferry.HTTPResponse)
        if let body {
            let length: Int64? =
                switch body.length {
                case .known(let length): length
                case .unknown: request.headerFields[.contentLength].flatMap { Int64($0) }
                }
            (bytes, response) = try await session.bytes(
                for: urlRequest,
                body: body,
                length: length,
                replayable: body.iterationBehavior == .multiple
            )
        } else {
            (bytes, response) = try await session.bytes(for: urlRequest)
        }
        return (Self.head(of: response), Self.body(of: bytes, response: response, method: request.method))
    }

    // MARK: Conversions

    /// The request Ferry sends: `baseURL` with the request's path appended and its query,
    /// the method, and the header fields but those that frame the body (Ferry frames it).
    static func urlRequest(for request: HTTPTypes.HTTPRequest, baseURL: URL) throws(FerryError) -> URLRequest {
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: true),
            let target = URLComponents(string: request.path ?? "/")
        else {
            throw FerryError(
                .invalidURL,
                "Cannot join the server URL '\(baseURL.absoluteString)' and the path '\(request.path ?? "")'."
            )
        }
        var path = components.percentEncodedPath
        if path.hasSuffix("/"), target.percentEncodedPath.hasPrefix("/") { path.removeLast() }
        components.percentEncodedPath = path + target.percentEncodedPath
        components.percentEncodedQuery = target.percentEncodedQuery
        guard let url = components.url else {
            throw FerryError(.invalidURL, "'\(components.string ?? "")' is not a URL.")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headerFields where !Self.framing.contains(field.name) {
            urlRequest.addValue(field.value, forHTTPHeaderField: field.name.rawName)
        }
        return urlRequest
    }

    /// Fields Ferry writes itself from the body it sends.
    private static let framing: Set<HTTPField.Name> = [.contentLength, .transferEncoding]

    /// Ferry's response head as swift-http-types has it.
    static func head(of response: Ferry.HTTPResponse) -> HTTPTypes.HTTPResponse {
        var fields = HTTPFields()
        for (name, value) in response.headers {
            guard let name = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: name, value: value))
        }
        return HTTPTypes.HTTPResponse(
            status: .init(code: response.statusCode, reasonPhrase: response.reasonPhrase),
            headerFields: fields
        )
    }

    /// The response body as the runtime reads it: streamed, iterated once, with the length
    /// the server announced when Ferry hands the bytes on as they came (no decoding).
    static func body(
        of bytes: ResponseBytes,
        response: Ferry.HTTPResponse,
        method: HTTPTypes.HTTPRequest.Method
    ) -> HTTPBody? {
        if method == .head || response.statusCode == 204 || response.statusCode == 304 { return nil }
        let decoded =
            response.headers["Content-Encoding"] != nil
            && bytes.task.session?.configuration.automaticDecompression == true
        let length: HTTPBody.Length = response.expectedContentLength.map { decoded ? .unknown : .known($0) } ?? .unknown
        return HTTPBody(ByteChunks(bytes: bytes), length: length, iterationBehavior: .single)
    }
}

/// A response body's chunks as the runtime's `HTTPBody` takes them.
struct ByteChunks: AsyncSequence, Sendable {
    typealias Element = ArraySlice<UInt8>

    let bytes: ResponseBytes

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: ResponseBytes.Chunks.AsyncIterator

        mutating func next() async throws -> ArraySlice<UInt8>? {
            try await base.next().map { ArraySlice($0) }
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: bytes.chunks.makeAsyncIterator()) }
}
