import Dispatch
import Ferry
import FerryTestServer
import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Progress closures (AFNetworking's `uploadProgress:` / `downloadProgress:` blocks): in
/// order, the last at 100 %, before the completion handler, on the queue asked for.
@Suite("Progress closures")
struct ProgressClosureTests {
    /// Collects a task's progress calls and says when its completion handler ran.
    final class Recorder: Sendable {
        let calls = MutexBox<[TransferProgress]>([])
        let callsAtCompletion = MutexBox<Int?>(nil)
        let onQueue = MutexBox<[Bool]>([])
        let (completed, completion) = AsyncStream.makeStream(of: FerryError?.self)

        func record(_ progress: TransferProgress) { calls.mutate { $0.append(progress) } }

        func complete(_ error: FerryError?) {
            callsAtCompletion.mutate { $0 = calls.value.count }
            completion.yield(error)
            completion.finish()
        }

        func waitForCompletion() async -> FerryError? {
            for await error in completed { return error }
            return nil
        }

        /// Non-decreasing, ending at `total` of `total`, and all of it heard before the
        /// completion handler ran.
        func expectOrdered(endingAt total: Int64, sourceLocation: SourceLocation = #_sourceLocation) {
            let calls = self.calls.value
            #expect(!calls.isEmpty, sourceLocation: sourceLocation)
            let completed = calls.map(\.completedBytes)
            #expect(completed == completed.sorted(), sourceLocation: sourceLocation)
            #expect(
                calls.last == TransferProgress(completedBytes: total, totalBytes: total),
                sourceLocation: sourceLocation
            )
            #expect(
                callsAtCompletion.value == calls.count,
                "a call came after the completion handler",
                sourceLocation: sourceLocation
            )
        }
    }

    @Test func aDownloadReportsInOrderEndingAtTheWholeFile() async throws {
        try await withServer { server in
            let session = try makeSession()
            let recorder = Recorder()
            let destination = try makeTemporaryDirectory().appendingPathComponent("f.bin")
            let task = session.downloadTask(
                with: URLRequest(url: server.url("/bytes/3000000?drip=100000&interval=5")),
                to: .file(destination)
            ) { _, _, error in recorder.complete(error) }
            task.onDownloadProgress { recorder.record($0) }
            task.resume()
            #expect(await recorder.waitForCompletion() == nil)
            recorder.expectOrdered(endingAt: 3_000_000)
            #expect(recorder.calls.value.count > 2, "progress came only at the end")
            #expect(recorder.calls.value.allSatisfy { $0.totalBytes == 3_000_000 })
        }
    }

    /// A data task's body is counted as it arrives; without a length the final call says
    /// 100 % of what came.
    @Test func aDataTaskWithoutLengthEndsAtWhatCame() async throws {
        try await withServer { server in
            let session = try makeSession()
            let recorder = Recorder()
            let task = session.dataTask(
                with: URLRequest(url: server.url("/bytes/500000?chunked=1&drip=50000&interval=5"))
            ) {
                _,
                _,
                error in recorder.complete(error)
            }
            task.resume()
            // Set after resume: heard from then on.
            task.onDownloadProgress { recorder.record($0) }
            #expect(await recorder.waitForCompletion() == nil)
            recorder.expectOrdered(endingAt: 500_000)
        }
    }

    /// The upload's progress, on the queue asked for.
    @Test func anUploadReportsOnTheQueueItNames() async throws {
        try await withServer { server in
            let session = try makeSession()
            let recorder = Recorder()
            let file = try makeTemporaryDirectory().appendingPathComponent("up.bin")
            try TestContent.data(size: 4_000_000).write(to: file)
            let queue = DispatchQueue(label: "progress")
            let key = DispatchSpecificKey<Int>()
            queue.setSpecific(key: key, value: 1)
            let task = session.uploadTask(
                with: URLRequest(url: server.url("/sink"), method: .post),
                fromFile: file
            ) { _, _, error in recorder.complete(error) }
            task.onUploadProgress(queue: queue) { progress in
                recorder.onQueue.mutate { $0.append(DispatchQueue.getSpecific(key: key) == 1) }
                recorder.record(progress)
            }
            task.resume()
            #expect(await recorder.waitForCompletion() == nil)
            // Every call on the queue ran before the completion handler did.
            recorder.expectOrdered(endingAt: 4_000_000)
            #expect(recorder.onQueue.value.allSatisfy { $0 } && !recorder.onQueue.value.isEmpty)
        }
    }

    /// A progress queue busy when the task ends: the completion handler waits for the calls
    /// sent there (it used to run first, while they waited).
    @Test func theCompletionHandlerComesAfterTheCallsOnABusyQueue() async throws {
        try await withServer { server in
            let session = try makeSession()
            let recorder = Recorder()
            let queue = DispatchQueue(label: "busy progress")
            let busy = DispatchSemaphore(value: 0)
            queue.async { busy.wait() }
            let task = session.dataTask(with: URLRequest(url: server.url("/bytes/300000"))) { _, _, error in
                recorder.complete(error)
            }
            task.onDownloadProgress(queue: queue) { recorder.record($0) }
            let events = task.events
            task.resume()
            // The task's own events end when it completes; the queue is still busy.
            _ = await collectEvents(events)
            busy.signal()
            #expect(await recorder.waitForCompletion() == nil)
            recorder.expectOrdered(endingAt: 300_000)
        }
    }

    @Test func aHandlerSetAfterSuccessGetsTheFinalCall() async throws {
        try await withServer { server in
            let session = try makeSession()
            let task = session.dataTask(with: server.url("/bytes/1000"))
            let events = task.events
            task.resume()
            _ = await collectEvents(events)
            let (calls, continuation) = AsyncStream.makeStream(of: TransferProgress.self)
            task.onDownloadProgress { progress in
                continuation.yield(progress)
                continuation.finish()
            }
            var heard: [TransferProgress] = []
            for await progress in calls { heard.append(progress) }
            #expect(heard == [TransferProgress(completedBytes: 1000, totalBytes: 1000)])
        }
    }
}
