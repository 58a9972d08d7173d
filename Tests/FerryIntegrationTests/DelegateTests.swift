import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Records every delegate call in order.
final class RecordingDelegate: SessionDelegate {
    let calls = MutexBox<[String]>([])
    let disposition: ResponseDisposition
    let copiedFile = MutexBox<Data?>(nil)
    let invalidated = AsyncStream<Void>.makeStream()

    init(disposition: ResponseDisposition = .allow) { self.disposition = disposition }

    func record(_ call: String) { calls.mutate { $0.append(call) } }

    func session(_ session: Session, dataTask: DataTask, didReceive response: HTTPResponse) async -> ResponseDisposition
    {
        record("response \(dataTask.taskIdentifier) \(response.statusCode)")
        return disposition
    }

    func session(
        _ session: Session,
        task: SessionTask,
        willPerformRedirection response: HTTPResponse,
        newRequest: URLRequest
    )
        async -> URLRequest?
    {
        record("redirect \(task.taskIdentifier)")
        return newRequest
    }

    func session(_ session: Session, dataTask: DataTask, didReceive data: Data) {
        record("data \(dataTask.taskIdentifier)")
    }

    func session(_ session: Session, dataTask: DataTask, didBecome downloadTask: DownloadTask) {
        record("became \(dataTask.taskIdentifier) -> \(downloadTask.taskIdentifier)")
    }

    func session(_ session: Session, downloadTask: DownloadTask, didFinishDownloadingTo location: URL) {
        record("finished \(downloadTask.taskIdentifier)")
        copiedFile.mutate { $0 = try? Data(contentsOf: location) }
    }

    func session(_ session: Session, task: SessionTask, didCompleteWithError error: FerryError?) {
        record("complete \(task.taskIdentifier) \(error.map { "\($0.reason)" } ?? "ok")")
    }

    func session(_ session: Session, didBecomeInvalidWithError error: FerryError?) {
        record("invalid")
        invalidated.continuation.yield()
        invalidated.continuation.finish()
    }
}

@Suite("Delegate")
struct DelegateTests {
    func calls(_ delegate: RecordingDelegate) -> [String] {
        delegate.calls.value.reduce(into: []) { result, call in
            if call.hasPrefix("data"), result.last == call { return }  // fold repeated data calls
            result.append(call)
        }
    }

    @Test func callsArriveInOrderAndCompleteOnce() async throws {
        try await withServer { server in
            let delegate = RecordingDelegate()
            let session = try makeSession(delegate: delegate)
            let task = session.dataTask(with: server.url("/redirect/1?to=/bytes/200000"))
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            session.finishTasksAndInvalidate()
            for await _ in delegate.invalidated.stream {}
            #expect(calls(delegate) == ["redirect 1", "response 1 200", "data 1", "complete 1 ok", "invalid"])
            #expect(session.delegate == nil)
        }
    }

    /// The response decision takes the data task as a `DataTask` (uploads are data tasks),
    /// and is asked of data and upload tasks only.
    @Test func responseDecisionsAreTypedByTheTaskTheyAreAbout() async throws {
        final class Kinds: SessionDelegate {
            let seen = MutexBox<[String]>([])
            func session(
                _ session: Session,
                dataTask: DataTask,
                didReceive response: HTTPResponse
            ) async -> ResponseDisposition {
                seen.mutate { $0.append("\(type(of: dataTask)) \(response.statusCode)") }
                return .allow
            }
        }
        try await withServer { server in
            let delegate = Kinds()
            let session = try makeSession(delegate: delegate)
            _ = try await session.data(from: server.url("/bytes/10"))
            _ = try await session.upload(for: URLRequest(url: server.url("/sink"), method: .post), from: Data("x".utf8))
            _ = try await session.download(from: server.url("/bytes/10"))
            #expect(delegate.seen.value == ["DataTask 200", "UploadTask 200"])
        }
    }

    @Test func cancelDispositionEndsTheTask() async throws {
        try await withServer { server in
            let session = try makeSession(delegate: RecordingDelegate(disposition: .cancel))
            await #expect {
                try await session.data(from: server.url("/bytes/10"))
            } throws: { error in
                (error as? FerryError)?.reason == .cancelledByDelegate
            }
        }
    }

    @Test func dataTaskBecomesDownload() async throws {
        try await withServer { server in
            let delegate = RecordingDelegate(disposition: .becomeDownload)
            let session = try makeSession(delegate: delegate)
            let task = session.dataTask(with: server.url("/bytes/300000?seed=8"))
            let events = task.events
            let sessionEvents = session.events
            task.resume()
            let seen = await collectEvents(events)
            guard case .becameDownload(let download) = seen.first(where: { $0.name == "becameDownload" }) else {
                Issue.record("no becameDownload event: \(seen.map(\.name))")
                return
            }
            _ = await collectEvents(download.events)
            #expect(download.error == nil)
            #expect(task.error == nil)
            session.finishTasksAndInvalidate()
            for await _ in sessionEvents {}
            for await _ in delegate.invalidated.stream {}
            #expect(delegate.copiedFile.value == TestContent.data(size: 300_000, seed: 8))
            let recorded = calls(delegate)
            #expect(
                recorded == [
                    "response 1 200", "became 1 -> 2", "complete 1 ok", "finished 2", "complete 2 ok", "invalid",
                ]
            )
            #expect(files(in: session.configuration.downloadsDirectory).isEmpty)
        }
    }
}

/// A delegate written against Ferry's earlier signatures (`task: SessionTask` for the response
/// decision, `dataTask: SessionTask` for data): still called, not silently passed over.
final class EarlierShapeDelegate: SessionDelegate {
    let calls = MutexBox<[String]>([])

    func session(_ session: Session, task: SessionTask, didReceive response: HTTPResponse) async -> ResponseDisposition
    {
        calls.mutate { $0.append("response \(response.statusCode)") }
        return response.statusCode == 404 ? .cancel : .allow
    }

    func session(_ session: Session, dataTask: SessionTask, didReceive data: Data) {
        calls.mutate { $0.append("data") }
    }
}

@Suite("Delegates of an earlier shape")
struct EarlierShapeDelegateTests {
    @Test func aDelegateWrittenAgainstTheEarlierSignaturesIsStillCalled() async throws {
        try await withServer { server in
            let delegate = EarlierShapeDelegate()
            let session = try makeSession(delegate: delegate)
            let (body, _) = try await session.data(from: server.url("/bytes/1000?seed=2"))
            #expect(body.count == 1000)
            #expect(delegate.calls.value.first == "response 200")
            #expect(delegate.calls.value.contains("data"))
            // Its answer counts: `.cancel` from the old form cancels the task.
            await #expect(throws: FerryError.self) { try await session.data(from: server.url("/status/404")) }
            #expect(delegate.calls.value.last == "response 404")
        }
    }
}
