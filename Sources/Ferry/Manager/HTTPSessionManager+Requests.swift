public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

/// The calls: one per method, each building its request from the manager's settings, running
/// it in the session, validating the response and serializing the body.
extension HTTPSessionManager {
    /// The absolute URL `path` names: resolved against ``baseURL`` as RFC 3986 §5.2 says
    /// (`users` under `https://api.example.com/v1/` is `…/v1/users`; `/users` is
    /// `https://api.example.com/users`; an absolute URL stays as it is).
    ///
    /// - Throws: ``FerryError/Reason/invalidURL`` when the result is not an http(s) URL with
    ///   a host.
    public func url(for path: String) throws(FerryError) -> URL {
        guard let url = URL(string: path, relativeTo: baseURL)?.absoluteURL,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false
        else {
            let base = baseURL.map { " against \($0.absoluteString)" } ?? ""
            throw FerryError(.invalidURL, "'\(path)'\(base) is not an http(s) URL with a host.")
        }
        return url
    }

    /// The request a call sends: the URL for `path`, the default header fields under
    /// `headers`, and `parameters` in the query (`GET`, `HEAD`, `DELETE`) or encoded into the
    /// body by ``bodyEncoder``.
    ///
    /// - Throws: ``FerryError/Reason/invalidURL`` for a path that names no http(s) URL,
    ///   ``FerryError/Reason/invalidRequest`` for parameters that cannot be encoded.
    public func request(
        _ method: HTTPMethod,
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) throws(FerryError) -> URLRequest {
        var request = URLRequest(url: try url(for: path))
        request.method = method
        let (defaults, bodyEncoder, queryEncoder) = settings.withLock {
            (
                $0.headers, $0.bodyEncoder,
                URLEncodedFormParameterEncoder(destination: .query, arrayEncoding: $0.queryArrayEncoding)
            )
        }
        let own = Set(headers.keys.map { $0.lowercased() })
        for (name, value) in defaults where !own.contains(name.lowercased()) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        guard let parameters else { return request }
        let inQuery: Set<HTTPMethod> = [.get, .head, .delete]
        let encoder: any ParameterEncoder =
            inQuery.contains(method) ? queryEncoder : bodyEncoder
        do {
            return try encoder.encode(parameters, into: request)
        } catch {
            throw FerryError(
                .invalidRequest,
                "The parameters of \(method.rawValue) \(path) cannot be encoded.",
                underlying: error
            )
        }
    }

    // MARK: Calls

    /// `GET path` with `parameters` in the query.
    public func get(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        try await send(request(.get, path, parameters: parameters, headers: headers))
    }

    /// `HEAD path` with `parameters` in the query: the response head only.
    public func head(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> HTTPResponse {
        let request = try request(.head, path, parameters: parameters, headers: headers)
        let (data, response) = try await session.data(for: request)
        try validate(response, body: data)
        return response
    }

    /// `POST path` with `parameters` in the body (``bodyEncoder``).
    public func post(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        try await send(request(.post, path, parameters: parameters, headers: headers))
    }

    /// `POST path` with a `multipart/form-data` body: `parameters` as its first text fields,
    /// then the parts `constructingBody` appends (files are streamed from disk).
    ///
    /// ```swift
    /// let (reply, _) = try await api.post("photos", parameters: ["album": "2026"]) { form in
    ///     try form.append(fileURL: photo, name: "photo")
    /// }
    /// ```
    public func post(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        constructingBody: (inout MultipartFormData) throws -> Void
    ) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        var request = try request(.post, path, headers: headers)
        let form = try MultipartFormData.form(fields: parameters, for: &request, path, constructingBody)
        let (data, response) = try await session.upload(for: request, multipartFormData: form)
        return try serialize(data, response: response)
    }

    /// `PUT path` with `parameters` in the body (``bodyEncoder``).
    public func put(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        try await send(request(.put, path, parameters: parameters, headers: headers))
    }

    /// `PATCH path` with `parameters` in the body (``bodyEncoder``).
    public func patch(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        try await send(request(.patch, path, parameters: parameters, headers: headers))
    }

    /// `DELETE path` with `parameters` in the query.
    public func delete(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        try await send(request(.delete, path, parameters: parameters, headers: headers))
    }

    // MARK: Running

    /// Runs `request` in the session, then validates and serializes its response.
    public func send(_ request: URLRequest) async throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        let (data, response) = try await session.data(for: request)
        return try serialize(data, response: response)
    }

    func serialize(_ data: Data, response: HTTPResponse) throws(FerryError) -> (Serializer.Output, HTTPResponse) {
        try validate(response, body: data)
        do {
            return (try responseSerializer.serialize(data, response: response), response)
        } catch {
            throw FerryError.mapping(error)
        }
    }

    func validate(_ response: HTTPResponse, body: Data) throws(FerryError) {
        do {
            try validation.validate(response, body: body)
        } catch {
            throw FerryError.mapping(error)
        }
    }
}

extension MultipartFormData {
    /// A form of `fields` as text parts, then the parts `constructingBody` appends: the
    /// body of the manager's multipart `POST path`. Sets `request`'s `Content-Type` to the
    /// form's (with its boundary), over any default field: the body is multipart whatever
    /// the manager's defaults say.
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` when a field cannot be encoded or
    ///   `constructingBody` throws (a ``FerryError`` it throws as it is).
    static func form(
        fields: (any Encodable & Sendable)?,
        for request: inout URLRequest,
        _ path: String,
        _ constructingBody: (inout MultipartFormData) throws -> Void
    ) throws(FerryError) -> MultipartFormData {
        var form = MultipartFormData()
        do {
            if let fields {
                for (name, value) in try FormPairsEncoder.pairs(from: fields) { form.append(value, name: name) }
            }
            try constructingBody(&form)
        } catch let error as FerryError {
            throw error
        } catch {
            throw FerryError(.invalidRequest, "The multipart body of POST \(path) cannot be built.", underlying: error)
        }
        request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        return form
    }
}
