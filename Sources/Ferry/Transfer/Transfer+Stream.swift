import Foundation

/// A streamed response (``Session/bytes(for:)``): the head goes to the caller as soon as it
/// is final, the body into a ``ResponseStreamSink`` at the reader's pace.
extension Transfer {
    /// Hands the final response to `sink`, then its body chunk by chunk. Any status is handed
    /// over, as `data(for:)` does: the reader judges it.
    ///
    /// The loop waits while the task is suspended and while the reader is behind; neither
    /// counts as idleness. The task completes (and the sequence ends) once the last chunk was
    /// handed over.
    func stream(_ body: ResponseBody, head: HTTPResponse, to sink: ResponseStreamSink) async throws -> TaskOutcome {
        origin.client.didReceive(response: head)
        sink.deliver(head)
        let task = origin
        var reader = BodyReader(task: task)
        reader.decoding = try .make(for: head, configuration)
        try await reader.read(body) { chunk in
            chunk.withUnsafeReadableBytes { task.client.didReceive(data: $0, publishData: false) }
            try await sink.yield(chunk) { task.client.setQueued($0) }
        }
        reader.publishTrailers()
        guard task.client.transferWillFinish() else { throw CancellationError() }
        return .streamed
    }
}
