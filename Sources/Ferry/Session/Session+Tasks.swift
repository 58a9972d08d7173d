public import Foundation

#if canImport(FoundationNetworking)
public import FoundationNetworking
#endif

extension Session {
    // MARK: Data tasks

    /// A data task for `request`, created suspended: call `resume()`.
    public func dataTask(with request: URLRequest) -> DataTask {
        register { DataTask(identifier: $0, request: request, plan: .data, session: self) }
    }

    /// A data task for a GET of `url`.
    public func dataTask(with url: URL) -> DataTask { dataTask(with: URLRequest(url: url)) }

    // MARK: Upload tasks

    /// An upload task sending `data` as the body.
    public func uploadTask(with request: URLRequest, from data: Data) -> UploadTask {
        makeUploadTask(request, .success(.data(data)))
    }

    /// An upload task streaming the file at `fileURL` from disk (its size is read now).
    public func uploadTask(with request: URLRequest, fromFile fileURL: URL) -> UploadTask {
        makeUploadTask(request, Result { try RequestBody.file(at: fileURL) }.mapError { FerryError.mapping($0) })
    }

    /// An upload task sending a one-shot async sequence of byte chunks.
    ///
    /// - Parameters:
    ///   - request: The request; its method, URL and header fields are sent.
    ///   - stream: The body, for example an `AsyncStream<Data>`. Iterated once, as the
    ///     connection asks; a redirect that needs the body again fails the task.
    ///   - length: The exact length, sent as `Content-Length`; `nil` sends the body chunked.
    public func uploadTask<Stream: AsyncSequence & Sendable>(
        with request: URLRequest,
        fromStream stream: Stream,
        length: Int64?
    ) -> UploadTask where Stream.Element: DataProtocol {
        makeUploadTask(request, .success(.stream(.oneShot(stream), length: length)))
    }

    /// An upload task whose body comes from `bodyProvider`, asked for a new sequence each
    /// time the body is sent from the start: URLSession's `needNewBodyStream`. Unlike a
    /// one-shot stream, such a body is sent again after a 307 / 308 redirect, an
    /// authentication challenge or an interceptor's retry.
    ///
    /// ```swift
    /// let task = session.uploadTask(with: request, length: size) {
    ///     try FileHandle(forReadingFrom: file).bytes  // any AsyncSequence of bytes
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - request: The request; its method, URL and header fields are sent.
    ///   - length: The exact length of every sequence, sent as `Content-Length`; `nil` sends
    ///     the body chunked.
    ///   - bodyProvider: Makes the body's sequence; called when the body is first sent and
    ///     again for each resend. An error it throws fails the task with
    ///     ``FerryError/Reason/uploadBodyFailed``.
    public func uploadTask<Stream: AsyncSequence & Sendable>(
        with request: URLRequest,
        length: Int64?,
        bodyProvider: @escaping @Sendable () async throws -> Stream
    ) -> UploadTask where Stream.Element: DataProtocol {
        makeUploadTask(request, .success(.provided(.provided(by: bodyProvider), length: length)))
    }

    /// An upload task sending a `multipart/form-data` body, streamed with an exact
    /// `Content-Length`; sets `Content-Type` (with the boundary) unless the request has one.
    public func uploadTask(with request: URLRequest, multipartFormData form: MultipartFormData) -> UploadTask {
        var request = request
        if request.value(forHTTPHeaderField: "Content-Type") == nil {
            request.setValue(form.contentType, forHTTPHeaderField: "Content-Type")
        }
        return makeUploadTask(request, .success(form.requestBody))
    }

    /// The MIME type Ferry sends for a file with this name (from its extension;
    /// `application/octet-stream` when unknown).
    public static func mimeType(forFileNamed name: String) -> String { MIMEType.forExtension(of: name) }

    /// Uploads the file at `fileURL` to `url` as the raw body of a `PUT` (or `POST`,
    /// `PATCH`), with its MIME type as `Content-Type`: REST-style uploads.
    public func upload(
        fromFile fileURL: URL,
        to url: URL,
        method: HTTPMethod = .put
    ) async throws(FerryError)
        -> (Data, HTTPResponse)
    {
        var request = URLRequest(url: url, method: method)
        request.setValue(Self.mimeType(forFileNamed: fileURL.lastPathComponent), forHTTPHeaderField: "Content-Type")
        return try await upload(for: request, fromFile: fileURL)
    }

    /// An upload task that continues from `resumeData` (from
    /// ``UploadTask/cancelProducingResumeData()``, a failed upload's
    /// ``FerryError/uploadResumeData``, or a ``ResumeStore``): it asks the upload resource
    /// for its offset and sends the rest of the file the upload was made from. If the server
    /// dropped the resource, the upload starts again from byte 0 at the target. URLSession's
    /// `uploadTask(withResumeData:)`.
    ///
    /// - Parameters:
    ///   - resumeData: What continues the upload; it must name its ``UploadResumeData/sourceFile``
    ///     (an upload from data continues with ``uploadTask(withResumeData:from:headers:)``).
    ///   - headers: Header fields to add, such as credentials, which resume data never keeps.
    public func uploadTask(withResumeData resumeData: UploadResumeData, headers: [String: String] = [:]) -> UploadTask {
        let body = Result { () throws -> RequestBody in
            guard let file = resumeData.sourceFile else {
                throw FerryError(
                    .invalidResumeData,
                    "The upload resume data names no file; give its body with uploadTask(withResumeData:from:)."
                )
            }
            return try RequestBody.file(at: file)
        }
        return makeUploadTask(resumeData.request(adding: headers), body.mapError { FerryError.mapping($0) }, resumeData)
    }

    /// An upload task that continues from `resumeData` with `data`, the whole body the upload
    /// was made with (the bytes the server holds are not sent again).
    public func uploadTask(
        withResumeData resumeData: UploadResumeData,
        from data: Data,
        headers: [String: String] = [:]
    ) -> UploadTask {
        makeUploadTask(resumeData.request(adding: headers), .success(.data(data)), resumeData)
    }

    /// Continues an upload from `resumeData`; returns the response body and response.
    public func upload(
        resumingWith resumeData: UploadResumeData,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (Data, HTTPResponse) {
        try await run(uploadTask(withResumeData: resumeData, headers: headers), \.data)
    }

    private func makeUploadTask(
        _ request: URLRequest,
        _ body: Result<RequestBody, FerryError>,
        _ resume: UploadResumeData? = nil
    ) -> UploadTask {
        switch body {
        case .success(let body):
            if let resume, let length = resume.totalLength, body.length != length {
                return makeUploadTask(
                    request,
                    .failure(
                        FerryError(
                            .invalidResumeData,
                            "The body has \(body.length.map(String.init) ?? "an unknown number of") bytes; the upload it continues has \(length)."
                        )
                    )
                )
            }
            let task = register { UploadTask(identifier: $0, request: request, plan: .upload(body), session: self) }
            if let resume { task.storage.withLock { $0.uploadResume = resume } }
            return task
        case .failure(let error):
            let task = register {
                UploadTask(identifier: $0, request: request, plan: .upload(.data(Data())), session: self)
            }
            task.cancel(with: error)
            return task
        }
    }

    // MARK: Download tasks

    /// A download task. With a `destination`, the finished file is moved there; without one,
    /// it is offered to the delegate's `didFinishDownloadingTo` and removed afterwards.
    public func downloadTask(with request: URLRequest, to destination: DownloadDestination? = nil) -> DownloadTask {
        downloadTask(request, nil, destination.map { .destination($0) } ?? .delegate)
    }

    /// A download task that continues from `resumeData` (from
    /// ``DownloadTask/cancelProducingResumeData()`` or a failed download's
    /// ``FerryError/resumeData``). It asks for the missing bytes with `Range` and `If-Range`;
    /// if the partial file is gone or changed, or the resource changed, it starts over and
    /// publishes ``TaskEvent/resumedAtOffset(_:expectedTotalBytes:)`` with offset 0.
    ///
    /// - Parameters:
    ///   - resumeData: What continues the download.
    ///   - destination: Where the file goes; `nil` offers it to the delegate.
    ///   - headers: Header fields to add, such as credentials, which resume data never keeps.
    public func downloadTask(
        withResumeData resumeData: ResumeData,
        to destination: DownloadDestination? = nil,
        headers: [String: String] = [:]
    ) -> DownloadTask {
        downloadTask(
            URLRequest(resuming: resumeData, headers: headers),
            resumeData,
            destination.map { .destination($0) } ?? .delegate
        )
    }

    /// Continues a download from `resumeData` and returns the file and final response.
    public func download(
        resumingWith resumeData: ResumeData,
        to destination: DownloadDestination? = nil,
        headers: [String: String] = [:]
    ) async throws(FerryError) -> (URL, HTTPResponse) {
        let delivery: DownloadDelivery = destination.map { .destination($0) } ?? .handOver
        return try await run(
            downloadTask(URLRequest(resuming: resumeData, headers: headers), resumeData, delivery),
            \.file
        )
    }

    /// A registered download task, from `resumeData` when given.
    func downloadTask(_ request: URLRequest, _ resumeData: ResumeData?, _ delivery: DownloadDelivery) -> DownloadTask {
        register {
            DownloadTask(identifier: $0, request: request, plan: .download(delivery, resume: resumeData), session: self)
        }
    }

    /// A download task for a GET of `url`.
    public func downloadTask(with url: URL, to destination: DownloadDestination? = nil) -> DownloadTask {
        downloadTask(with: URLRequest(url: url), to: destination)
    }

    // MARK: async / await

    /// Loads `request` and returns its body and response. Any status is a success; check it
    /// with ``ResponseValidation``. Cancelling the calling Swift task cancels the transfer.
    public func data(for request: URLRequest) async throws(FerryError) -> (Data, HTTPResponse) {
        let task = dataTask(with: request)
        return try await run(task, \.data)
    }

    /// Loads `url` with a GET.
    public func data(from url: URL) async throws(FerryError) -> (Data, HTTPResponse) {
        try await data(for: URLRequest(url: url))
    }

    /// Loads `request`, validates the response and turns the body into a value.
    ///
    /// ```swift
    /// let user = try await session.value(for: request, as: .decodable(User.self))
    /// ```
    public func value<Serializer: ResponseSerializer>(
        for request: URLRequest,
        as serializer: Serializer,
        validation: ResponseValidation = .successful
    ) async throws(FerryError) -> Serializer.Output {
        let (data, response) = try await data(for: request)
        do {
            try validation.validate(response, body: data)
            return try serializer.serialize(data, response: response)
        } catch {
            throw FerryError.mapping(error)
        }
    }

    /// Uploads `data` as the body of `request`; returns the response body and response.
    public func upload(for request: URLRequest, from data: Data) async throws(FerryError) -> (Data, HTTPResponse) {
        try await run(uploadTask(with: request, from: data), \.data)
    }

    /// Uploads the file at `fileURL`, streamed from disk.
    public func upload(for request: URLRequest, fromFile fileURL: URL) async throws(FerryError) -> (Data, HTTPResponse)
    {
        try await run(uploadTask(with: request, fromFile: fileURL), \.data)
    }

    /// Uploads a `multipart/form-data` body; returns the response body and response.
    public func upload(
        for request: URLRequest,
        multipartFormData form: MultipartFormData
    ) async throws(FerryError)
        -> (Data, HTTPResponse)
    {
        try await run(uploadTask(with: request, multipartFormData: form), \.data)
    }

    /// Uploads a one-shot async sequence of byte chunks; `length` `nil` sends it chunked.
    public func upload<Stream: AsyncSequence & Sendable>(
        for request: URLRequest,
        fromStream stream: Stream,
        length: Int64?
    ) async throws(FerryError) -> (Data, HTTPResponse) where Stream.Element: DataProtocol {
        try await run(uploadTask(with: request, fromStream: stream, length: length), \.data)
    }

    /// Uploads a body from `bodyProvider`, which is asked again whenever the body must be sent
    /// again (redirects, challenges); see ``uploadTask(with:length:bodyProvider:)``.
    public func upload<Stream: AsyncSequence & Sendable>(
        for request: URLRequest,
        length: Int64?,
        bodyProvider: @escaping @Sendable () async throws -> Stream
    ) async throws(FerryError) -> (Data, HTTPResponse) where Stream.Element: DataProtocol {
        try await run(uploadTask(with: request, length: length, bodyProvider: bodyProvider), \.data)
    }

    /// Downloads `request`. With a `destination` the returned URL is there; without one it is
    /// a file in the session's downloads directory that now belongs to the caller.
    public func download(
        for request: URLRequest,
        to destination: DownloadDestination? = nil
    ) async throws(FerryError) -> (URL, HTTPResponse) {
        try await run(downloadTask(request, nil, destination.map { .destination($0) } ?? .handOver), \.file)
    }

    /// Downloads `url` with a GET.
    public func download(
        from url: URL,
        to destination: DownloadDestination? = nil
    ) async throws(FerryError)
        -> (URL, HTTPResponse)
    {
        try await download(for: URLRequest(url: url), to: destination)
    }

    private func run<Value>(
        _ task: SessionTask,
        _ extract: (TaskOutcome) -> Value?
    ) async throws(FerryError) -> (Value, HTTPResponse) {
        let (error, outcome) = await withTaskCancellationHandler {
            task.resume()
            return await task.client.completion()
        } onCancel: {
            task.cancel()
        }
        if let error { throw error }
        guard let response = task.response, let value = outcome.flatMap(extract) else {
            throw FerryError(.badServerResponse, "The task completed without a response.")
        }
        return (value, response)
    }
}
