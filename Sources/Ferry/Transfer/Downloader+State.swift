import Foundation
import Logging

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a download keeps between its requests and across failures: the request for each
/// plan, its checkpoints and resume data, and whether its bytes are kept or discarded.
extension Downloader {
    /// Says what the next request asks for: the whole body, or the rest from a byte offset.
    func logPlan(_ plan: ResumePlanner.RequestPlan, bytesOnDisk: Int64) {
        switch plan {
        case .full:
            logger.debug("resume decision: the whole body", metadata: ["bytes-on-disk": "\(bytesOnDisk)"])
        case .range(let offset, let ifRange):
            logger.debug(
                "resume decision: a range",
                metadata: ["offset": "\(offset)", "if-range": "\(ifRange ?? "none")"]
            )
        }
    }

    /// The request for `plan`: `Range` and `If-Range` for a range, neither for a full
    /// request. (`Accept-Encoding: identity` is added as the request goes out, unless the
    /// request asks for a coding itself: see ``Transfer/exchange(_:body:connection:origin:)``. A
    /// coded body is stored as it came, and never continued with a range.)
    static func request(_ request: URLRequest, for plan: ResumePlanner.RequestPlan) -> URLRequest {
        var attempt = request
        switch plan {
        case .full:
            // (Each change to a `URLRequest` copies it: only what is there is taken out.)
            for field in ["Range", "If-Range"] where attempt.value(forHTTPHeaderField: field) != nil {
                attempt.setValue(nil, forHTTPHeaderField: field)
            }
        case .range(let offset, let ifRange):
            attempt.setValue("bytes=\(offset)-", forHTTPHeaderField: "Range")
            attempt.setValue(ifRange, forHTTPHeaderField: "If-Range")
        }
        return attempt
    }

    /// After a failure or cancel: keep the partial and attach resume data when its bytes can
    /// be continued (and the caller did not cancel without asking for resume data);
    /// otherwise remove it.
    func keepOrDiscard(
        _ file: PartialFile,
        after error: FerryError,
        request: URLRequest,
        planner: ResumePlanner,
        segments: SegmentPlan? = nil
    ) -> FerryError {
        var failure = error
        let cancelled = error.reason == .cancelled || task.client.isCanceling
        let resumable = planner.canResume(withChecksum: options.checksum != nil)
        var refused = error.reason == .checksumMismatch
        if error.reason.limit != nil { refused = true }
        let kept = segments?.written ?? file.length
        guard kept > 0, resumable, !cancelled || task.client.producesResumeData, !refused else {
            file.discard()
            stored?.remove()
            return failure
        }
        do {
            try file.finish()
            var resumeData = Self.resumeData(for: task, request: request, file: file, planner: planner)
            if let segments {
                resumeData.bytesOnDisk = segments.contiguousPrefix
                resumeData.segments = segments.segments
            }
            try file.writeMetadata(resumeData)
            try stored?.save(resumeData)
            failure.resumeData = resumeData
        } catch {
            // New metadata cannot be written (a full disk, most often): the last good
            // checkpoint still describes a prefix of the bytes on disk, and is what a resume
            // continues from (it cuts the file back to that length).
            if let kept = lastCheckpoint(of: file) {
                failure.resumeData = kept
            } else {
                file.discard()
                stored?.remove()
            }
        }
        return failure
    }

    /// The resume data last checkpointed for `file`, from the store or beside the file, when
    /// it still describes it.
    private func lastCheckpoint(of file: PartialFile) -> ResumeData? {
        let stored =
            stored?.resumeData()
            ?? (try? Data(contentsOf: file.metadataURL)).flatMap { try? ResumeData(decoding: $0) }
        guard let stored, stored.partialFile.standardizedFileURL == file.url.standardizedFileURL,
            stored.bytesOnDisk > 0, stored.bytesOnDisk <= file.length
        else { return nil }
        return stored
    }

    /// Checkpoints for `file` as the planner knows it now; disabled when its bytes could not
    /// be resumed anyway (no strong validator).
    func checkpoint(_ file: PartialFile, request: URLRequest, planner: ResumePlanner) -> Checkpoint {
        Checkpoint(
            file: file,
            template: Self.resumeData(for: task, request: request, file: file, planner: planner),
            enabled: planner.canResume(withChecksum: options.checksum != nil),
            stored: stored,
            logger: logger,
            telemetry: transfer.telemetry
        )
    }

    static func resumeData(
        for task: SessionTask,
        request: URLRequest,
        file: PartialFile,
        planner: ResumePlanner
    )
        -> ResumeData
    {
        var resumeData = ResumeData(
            originalURL: task.originalRequest.url ?? request.url ?? file.url,
            currentURL: request.url ?? file.url,
            method: request.method.rawValue,
            headers: (request.allHTTPHeaderFields ?? [:]).filter {
                !["range", "if-range", "accept-encoding"].contains($0.key.lowercased())
            },
            bytesOnDisk: file.length,
            totalLength: planner.partial.totalLength,
            validator: planner.partial.validator,
            partialFile: file.url
        )
        resumeData.bootID = FileSystem.bootID
        return resumeData
    }
}
