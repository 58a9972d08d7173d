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

/// The one step that hands a finished file on: to a destination, to the caller, or to
/// the delegate (downloads, a data task that became one, the daemon's finished files).
extension Transfer {
    /// Hands a finished file on as `delivery` says. `source`, the partial file Ferry wrote,
    /// is moved by its held directory and checked identity (see ``PartialFile``); without
    /// one (a file the daemon finished) the file is moved by its path.
    static func deliver(
        _ location: URL,
        head: HTTPResponse,
        task: SessionTask,
        delivery: DownloadDelivery,
        source: PartialFile? = nil
    )
        async throws -> TaskOutcome
    {
        switch delivery {
        case .handOver:
            task.client.publish(.finishedDownloading(location: location))
            return .file(location)
        case .delegate:
            await task.client.publishAndWaitForDelegate(.finishedDownloading(location: location))
            try? FileManager.default.removeItem(at: location)
            return .file(location)
        case .destination(let destination):
            task.client.publish(.finishedDownloading(location: location))
            do {
                let target = try destination.resolve(location, head)
                if let directories = destination.confinement, !PathConfinement.contains(resolved: directories, target) {
                    throw FerryError(
                        .fileSystem,
                        "'\(target.path)' no longer lies in a directory this download may write (a link changed since it was added): nothing was moved."
                    )
                }
                try FileSystem.moveFile(
                    from: source?.moveSource ?? FileSystem.MoveSource(location),
                    toPath: destination.fixedPath ?? FileSystem.path(target),
                    createDirectories: destination.options.contains(.createIntermediateDirectories),
                    replace: destination.options.contains(.removePreviousFile)
                )
                task.client.publish(.movedDownload(to: target))
                return .file(target)
            } catch {
                if let source { source.discard() } else { try? FileManager.default.removeItem(at: location) }
                var failure =
                    (error as? FerryError) ?? FerryError(.fileSystem, "Cannot move the download.", underlying: error)
                failure.response = head
                task.client.publish(.failedToMoveDownload(failure))
                throw failure
            }
        }
    }
}
