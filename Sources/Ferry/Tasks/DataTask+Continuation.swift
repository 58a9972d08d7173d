extension DataTask {
    /// A download task that continues this data task's response (disposition `.becomeDownload`).
    func continueAsDownload(in session: Session, response: HTTPResponse) throws -> DownloadTask {
        let request = currentRequest
        let download = session.register { identifier in
            DownloadTask(
                identifier: identifier,
                request: request,
                plan: .download(.delegate, resume: nil),
                session: session
            )
        }
        guard download.client.adoptTransfer(of: self, response: response) else {
            throw FerryError(.sessionInvalidated, "The session was invalidated while the task became a download.")
        }
        return download
    }

    /// A running stream task on the connection this data task's `Upgrade` or `CONNECT` opened;
    /// the data task announces it before it completes. Throws when the session was
    /// invalidated meanwhile: the stream task it refused has closed the connection.
    @discardableResult
    func continueAsStream(on connection: StreamConnection, in session: Session) throws(FerryError) -> StreamTask {
        let request = currentRequest
        let stream = session.register { identifier in
            StreamTask(
                identifier: identifier,
                request: request,
                plan: .socket(connection),
                session: session
            )
        }
        if stream.state == .completed {
            throw stream.error ?? FerryError(.sessionInvalidated, "The session was invalidated during the upgrade.")
        }
        stream.resume()
        client.publish(.becameStreamTask(stream))
        return stream
    }
}
