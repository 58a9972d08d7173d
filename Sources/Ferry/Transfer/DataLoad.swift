import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOSSL
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A data or upload task's response body: collected in memory (within
/// ``SessionConfiguration/maximumInMemoryBodySize``), handed to a download when the delegate
/// says `becomeDownload`, or loaded through the session's cache (`+Cache`).
///
/// A value made by the transfer for those plans; it uses the transfer for the task, the
/// session and the request loop.
struct DataLoad: TransferPart {
    let transfer: Transfer
}

extension DataLoad {
    // MARK: Bodies in memory

    /// A data or upload task's final response: announces it, asks the delegate what to do,
    /// then reads the body into memory (or hands it to a download).
    func consumeInMemory(_ body: ResponseBody, head: HTTPResponse) async throws -> TaskOutcome {
        origin.client.didReceive(response: head)
        if let delegate = session.delegate, let task = origin as? DataTask {
            let session = self.session
            switch await session.hub.ask({ await delegate.session(session, dataTask: task, didReceive: head) }) {
            case .allow:
                break
            case .cancel:
                throw FerryError(
                    .cancelledByDelegate,
                    "The delegate cancelled the task on its response.",
                    response: head
                )
            case .becomeDownload:
                return try await becomeDownload(body, head: head)
            }
        }
        return try await collect(body, head: head)
    }

    func collect(_ body: ResponseBody, head: HTTPResponse) async throws -> TaskOutcome {
        var reader = BodyReader(task: origin, limit: .memory(configuration.maximumInMemoryBodySize), head: head)
        // The announced length of a coded body is its coded size: refused only for the limit.
        try reader.limit?.refuse(announced: head.expectedContentLength, head: head)
        reader.decoding = try .make(for: head, configuration)
        var data = Data()
        if let expected = head.expectedContentLength { data.reserveCapacity(Int(expected)) }
        let client = origin.client
        try await reader.read(body) { chunk in
            chunk.withUnsafeReadableBytes { bytes in
                data.append(contentsOf: bytes)
                client.didReceive(data: bytes, publishData: true)
            }
        }
        reader.publishTrailers()
        guard origin.client.transferWillFinish() else { throw CancellationError() }
        return .data(data)
    }

    /// The data task's body continues in a new download task (disposition `.becomeDownload`).
    func becomeDownload(_ body: ResponseBody, head: HTTPResponse) async throws -> TaskOutcome {
        guard let dataTask = origin as? DataTask else { return try await collect(body, head: head) }
        let download = try dataTask.continueAsDownload(in: session, response: head)
        transfer.active.withLock { $0 = download }
        dataTask.client.publish(.becameDownload(download))
        if dataTask.client.transferWillFinish() {
            dataTask.client.transferDidFinish(error: nil, outcome: .becameDownload)
        }
        do {
            guard head.isSuccess else { throw await FerryError.unacceptableStatus(head, body: body) }
            let file = try PartialFile(inDirectoryAt: configuration.downloadsDirectoryPath)
            do {
                var writer = BodyWriter(
                    file: file,
                    task: download,
                    offset: 0,
                    skip: 0,
                    limit: head.expectedContentLength,
                    maximumFileSize: configuration.maximumFileSize
                )
                try await writer.write(body, checkpoint: nil)
                try file.finish()
            } catch {
                file.discard()
                throw error
            }
            guard download.client.transferWillFinish() else {
                file.discard()
                throw CancellationError()
            }
            let outcome = try await Transfer.deliver(file.url, head: head, task: download, delivery: .delegate)
            download.client.transferDidFinish(error: nil, outcome: outcome)
        } catch {
            download.client.transferDidFinish(error: transfer.ferryError(from: error), outcome: nil)
        }
        return .becameDownload
    }
}
