public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension Session {
    // MARK: Streamed responses

    /// Starts loading `request` and returns as soon as the final response head is in (after
    /// redirects and challenges), with its body as an async sequence read as it arrives.
    ///
    /// Like URLSession's `bytes(for:)`: memory stays constant however large the body, since
    /// the transfer reads from the connection only as fast as the sequence is read, and a
    /// reader that stops reading (or is cancelled) cancels the transfer. Any status is a
    /// response; check it before reading.
    ///
    /// ```swift
    /// let (bytes, response) = try await session.bytes(for: URLRequest(url: feed))
    /// for try await event in bytes.lines where event.hasPrefix("data: ") { print(event) }
    /// ```
    ///
    /// - Parameter request: The request; a body in `httpBody` is sent with it.
    /// - Returns: The body's bytes (with its ``ResponseBytes/task``) and the response.
    /// - Throws: ``FerryError`` when the task fails before a final response; cancelling the
    ///   calling Swift task while it waits cancels the transfer.
    public func bytes(for request: URLRequest) async throws(FerryError) -> (ResponseBytes, HTTPResponse) {
        try await streamed(request, body: nil)
    }

    /// ``bytes(for:)`` with a request body sent as the connection asks for it (FerryOpenAPI's
    /// transport streams both ways with it).
    ///
    /// - Parameters:
    ///   - request: The request; its method, URL and header fields are sent.
    ///   - body: The body's chunks.
    ///   - length: The exact length, sent as `Content-Length`; `nil` sends the body chunked.
    ///   - replayable: Whether `body` can be iterated again from its start (then it is sent
    ///     again after a 307 / 308 redirect or a challenge); otherwise it is iterated once.
    package func bytes<Body: AsyncSequence & Sendable>(
        for request: URLRequest,
        body: Body,
        length: Int64?,
        replayable: Bool
    ) async throws(FerryError) -> (ResponseBytes, HTTPResponse) where Body.Element: DataProtocol {
        let chunks: RequestBody =
            replayable
            ? .provided(.provided { body }, length: length) : .stream(.oneShot(body), length: length)
        return try await streamed(request, body: chunks)
    }

    private func streamed(
        _ request: URLRequest,
        body: RequestBody?
    ) async throws(FerryError) -> (ResponseBytes, HTTPResponse) {
        let sink = ResponseStreamSink()
        let task = register {
            DataTask(identifier: $0, request: request, plan: .stream(sink, body: body), session: self)
        }
        sink.demand.setOnTerminate { [weak task] in task?.cancel() }
        // Made before the task starts: whatever happens, the sequence's end has a reader
        // to tell, and a reader that drops it cancels the task.
        let bytes = ResponseBytes(task: task, sink: sink)
        let head = await withTaskCancellationHandler {
            task.resume()
            return await sink.head()
        } onCancel: {
            task.cancel()
        }
        return (bytes, try head.get())
    }

    /// Starts a GET of `url`; see ``bytes(for:)``.
    public func bytes(from url: URL) async throws(FerryError) -> (ResponseBytes, HTTPResponse) {
        try await bytes(for: URLRequest(url: url))
    }
}

extension Session {
    // MARK: Stream tasks

    /// A task for a TCP connection to `hostName` and `port`, created suspended: ``StreamTask``
    /// (URLSession's `streamTask(withHostName:port:)`). Background sessions refuse it.
    ///
    /// The connection goes as the session's requests go: through its
    /// ``SessionConfiguration/proxy`` when that applies to `hostName` (an HTTP proxy's
    /// `CONNECT` tunnel, or SOCKS5), straight to the host otherwise. TLS, if wanted, is
    /// started later with ``StreamTask/startSecureConnection()``.
    public func streamTask(withHostName hostName: String, port: Int) -> StreamTask {
        let authority = "\(URL.authorityHost(hostName)):\(port)"
        let url = URL(string: "tcp://\(authority)")
        let request = URLRequest(url: url ?? URL(fileURLWithPath: "/"))
        // Routed as an `http` origin is: the proxy's bypass list and the bridge decide alike.
        let route = Result { () throws(FerryError) in
            guard let url = URL(string: "http://\(authority)/") else { return StreamConnection.Route.direct }
            return try engine.streamRoute(for: url)
        }
        let task = register {
            StreamTask(
                identifier: $0,
                request: request,
                plan: .socket(StreamConnection(host: hostName, port: port, route: (try? route.get()) ?? .direct)),
                session: self
            )
        }
        if url == nil || !(1...65535).contains(port) {
            task.cancel(with: FerryError(.invalidURL, "'\(hostName)' port \(port) is not a TCP address."))
        } else if case .failure(let error) = route {
            task.cancel(with: error)
        }
        return task
    }
}
