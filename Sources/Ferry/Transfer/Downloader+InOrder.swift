import Foundation
import NIOCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Downloader {
    /// Downloads into a destination that is written in order and never replaced (see
    /// ``SequentialOutput``): standard output, a pipe, a device, a FIFO.
    ///
    /// No partial file, no checkpoints, no resume. A failure is retried (the retry policy's
    /// decision, each retry a new request from the original one, so every redirect hop is
    /// judged again) only while no byte has been written: a retry after that would repeat
    /// bytes the reader already has.
    func download(inOrderTo output: SequentialOutput) async throws -> TaskOutcome {
        var retry = RetryBudget(policy: options.retryPolicy)
        var progress = DownloadProgress(resumed: false)
        // Without decoding, the bytes are written as sent: `exchange` asks for them uncoded.
        let request = task.originalRequest
        while true {
            do {
                try await transfer.open(request, body: nil, decodesDownload: configuration.automaticDecompression).read
                {
                    body,
                    head in
                    try await write(head, body: body, inOrderTo: output, progress: &progress)
                }
                break
            } catch {
                var failure = transfer.ferryError(from: error)
                if Task.isCancelled || failure.reason == .cancelled { throw failure }
                if output.written > 0 {
                    if RetryPolicy.isTransient(failure) {
                        failure.message +=
                            " \(output.written) bytes were already written to \(output.name), which cannot take them again: not retried."
                    }
                    throw failure
                }
                guard case .retry(let attempt, let delay) = retry.decide(after: failure, cancelled: Task.isCancelled)
                else { throw failure }
                try await transfer.waitToRetry(attempt: attempt, delay: delay, after: failure)
            }
        }
        guard task.client.transferWillFinish() else { throw CancellationError() }
        return .file(output.url)
    }

    /// Writes one response's body into `output` as it arrives; an error status's body is
    /// never written.
    private func write(
        _ head: HTTPResponse,
        body: ResponseBody,
        inOrderTo output: SequentialOutput,
        progress: inout DownloadProgress
    ) async throws {
        // 206 is an answer only to a range the caller asked for itself.
        let askedForRange = task.originalRequest.value(forHTTPHeaderField: "Range") != nil
        guard head.isSuccess, head.statusCode != 206 || askedForRange else {
            throw await FerryError.unacceptableStatus(head, body: body)
        }
        progress.announceResponse(head, task: task)
        // A decoded body's length is not the Content-Length of the coded one.
        let expected =
            ResumePlanner.isCoded(head) ? nil : head.expectedBodyLength(forMethod: task.originalRequest.method)
        var reader = BodyReader(
            task: task,
            announced: expected,
            requiresAnnounced: true,
            limit: .file(configuration.maximumFileSize),
            head: head
        )
        try reader.limit?.refuse(announced: expected, head: head)
        reader.decoding = try .make(for: head, configuration)
        task.client.setDownloadPosition(0, expected: expected)
        var meter = ProgressMeter(task: task, direction: .written)
        try await reader.read(body) { chunk in
            try chunk.withUnsafeReadableBytes { try output.write($0) }
            meter.add(Int64(chunk.readableBytes))
        }
        meter.finish()
        reader.publishTrailers()
    }
}
