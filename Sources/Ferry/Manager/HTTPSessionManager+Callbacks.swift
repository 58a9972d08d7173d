import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The calls in AFNetworking's shape: progress, success and failure closures, and the task
/// returned (already resumed) so it can be suspended or cancelled.
///
/// ```swift
/// api.get("users/42", progress: { print($0.fractionCompleted ?? 0) },
///         success: { task, user in show(user) },
///         failure: { task, error in report(error) })
/// ```
///
/// The closures run in the session's serial delivery context: progress in order, its last
/// call at 100 % before `success` (for progress on a queue of your own, set it on the
/// returned task with ``SessionTask/onDownloadProgress(queue:_:)``).
/// Exactly one of `success` and `failure` is called. When the request cannot even be built
/// (a path that names no http(s) URL, parameters that do not encode), no task is made:
/// `failure` gets `nil` for the task and the call returns `nil`, as AFNetworking does.
extension HTTPSessionManager {
    /// Called with the task and the serialized value of an accepted response.
    public typealias Success = @Sendable (DataTask, Serializer.Output) -> Void
    /// Called with the task (`nil` if none was made) and why the call failed.
    public typealias Failure = @Sendable (DataTask?, FerryError) -> Void

    /// `GET path` (AFNetworking's `GET:parameters:headers:progress:success:failure:`).
    @discardableResult
    public func get(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        start(.get, path, parameters, headers, download: progress, success: success, failure: failure)
    }

    /// `POST path` with `parameters` in the body.
    @discardableResult
    public func post(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        uploadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        downloadProgress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        start(
            .post,
            path,
            parameters,
            headers,
            upload: uploadProgress,
            download: downloadProgress,
            success: success,
            failure: failure
        )
    }

    /// A multipart `POST path` (AFNetworking's
    /// `POST:parameters:headers:constructingBodyWithBlock:progress:success:failure:`):
    /// `parameters` as text fields, then the parts `constructingBody` appends; `progress`
    /// follows the upload.
    @discardableResult
    public func post(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        constructingBody: (inout MultipartFormData) throws -> Void,
        progress: (@Sendable (TransferProgress) -> Void)? = nil,
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        // `start` runs the closure before it returns.
        withoutActuallyEscaping(constructingBody) { constructingBody in
            start(
                .post,
                path,
                parameters,
                headers,
                constructingBody: constructingBody,
                upload: progress,
                success: success,
                failure: failure
            )
        }
    }

    /// `PUT path` with `parameters` in the body.
    @discardableResult
    public func put(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        start(.put, path, parameters, headers, success: success, failure: failure)
    }

    /// `PATCH path` with `parameters` in the body.
    @discardableResult
    public func patch(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        start(.patch, path, parameters, headers, success: success, failure: failure)
    }

    /// `HEAD path` with `parameters` in the query (AFNetworking's
    /// `HEAD:parameters:headers:success:failure:`): `success` gets the task, whose
    /// ``SessionTask/response`` is the accepted response head.
    @discardableResult
    public func head(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        success: @escaping @Sendable (DataTask) -> Void,
        failure: @escaping Failure
    ) -> DataTask? {
        let made = Result { () throws(FerryError) in
            session.dataTask(with: try request(.head, path, parameters: parameters, headers: headers))
        }
        return run(made, upload: nil, download: nil, failure: failure) {
            [self] task, response throws(FerryError) in
            try validate(response, body: task.receivedData ?? Data())
            success(task)
        }
    }

    /// `DELETE path` with `parameters` in the query.
    @discardableResult
    public func delete(
        _ path: String,
        parameters: (any Encodable & Sendable)? = nil,
        headers: [String: String] = [:],
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        start(.delete, path, parameters, headers, success: success, failure: failure)
    }

    // MARK: Running

    /// Makes the task for `method path` (a multipart upload with `constructingBody`), sets
    /// the closures and resumes it; an accepted response's body is serialized for `success`.
    private func start(
        _ method: HTTPMethod,
        _ path: String,
        _ parameters: (any Encodable & Sendable)?,
        _ headers: [String: String],
        constructingBody: ((inout MultipartFormData) throws -> Void)? = nil,
        upload: (@Sendable (TransferProgress) -> Void)? = nil,
        download: (@Sendable (TransferProgress) -> Void)? = nil,
        success: @escaping Success,
        failure: @escaping Failure
    ) -> DataTask? {
        let made = Result { () throws(FerryError) -> DataTask in
            guard let constructingBody else {
                return session.dataTask(with: try request(method, path, parameters: parameters, headers: headers))
            }
            var request = try request(method, path, headers: headers)
            let form = try MultipartFormData.form(fields: parameters, for: &request, path, constructingBody)
            return session.uploadTask(with: request, multipartFormData: form)
        }
        return run(made, upload: upload, download: download, failure: failure) {
            [self] task, response throws(FerryError) in
            let (value, _) = try serialize(task.receivedData ?? Data(), response: response)
            success(task, value)
        }
    }

    /// Sets the closures on the task `made` and resumes it: `failure` once if no task was
    /// made, the task fails, has no response or `deliver` throws; otherwise `deliver`, which
    /// calls `success`.
    private func run(
        _ made: Result<DataTask, FerryError>,
        upload: (@Sendable (TransferProgress) -> Void)?,
        download: (@Sendable (TransferProgress) -> Void)?,
        failure: @escaping Failure,
        deliver: @escaping @Sendable (DataTask, HTTPResponse) throws(FerryError) -> Void
    ) -> DataTask? {
        let task: DataTask
        switch made {
        case .success(let made):
            task = made
        case .failure(let error):
            Task { failure(nil, error) }
            return nil
        }
        if let upload { task.onUploadProgress(upload) }
        if let download { task.onDownloadProgress(download) }
        task.client.setCompletionHandler { completed, error in
            // Always a data task: the one this closure was set on (not captured, which would
            // make the task hold itself).
            guard let task = completed as? DataTask else { return }
            if let error {
                failure(task, error)
                return
            }
            guard let response = task.response else {
                failure(task, FerryError(.badServerResponse, "The task completed without a response."))
                return
            }
            do throws(FerryError) {
                try deliver(task, response)
            } catch {
                failure(task, error)
            }
        }
        task.resume()
        return task
    }
}
