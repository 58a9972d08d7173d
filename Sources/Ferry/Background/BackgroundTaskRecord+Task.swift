import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension BackgroundTaskRecord {
    /// This task of the daemon, which a previous process of `session` created, as a task of
    /// `session`, with its description, priority and progress so far.
    ///
    /// - Parameters:
    ///   - session: The background session that reattaches it.
    ///   - id: The daemon's id of the task.
    func reattached(to session: Session, id: Int64) -> SessionTask {
        let record = self
        var request = URLRequest(url: URL(string: record.url) ?? URL(fileURLWithPath: "/"))
        for (name, value) in record.headers { request.setValue(value, forHTTPHeaderField: name) }
        let task: SessionTask
        if record.kind == .upload, let source = record.sourceFile {
            request.httpMethod = record.method
            task = session.register { identifier in
                UploadTask(
                    identifier: identifier,
                    request: request,
                    plan: .upload(.file(URL(fileURLWithPath: source), length: record.bytesExpected ?? 0)),
                    session: session
                )
            }
        } else {
            let hasDelegate = session.delegate != nil
            task = session.register { identifier in
                DownloadTask(
                    identifier: identifier,
                    request: request,
                    plan: .download(hasDelegate ? .delegate : .handOver, resume: nil),
                    session: session
                )
            }
        }
        task.client.backgroundID = id
        task.taskDescription = record.taskDescription
        task.priority = Float(record.priority)
        task.earliestBeginDate = record.earliestBeginDate
        task.client.backgroundProgress(received: record.bytesReceived, expected: record.bytesExpected)
        return task
    }
}
