package import Foundation

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationNetworking)
package import FoundationNetworking
#endif

extension ResumeData {
    /// Resume data that continues `file`, a partial file another program left (a browser,
    /// wget, curl), once its last bytes were found to match the server's: `file` is flushed
    /// and renamed, in its own directory, to a partial file as Ferry names them, which the
    /// resume data then describes.
    ///
    /// The caller has checked the overlap: `response` answered a range that ends at the
    /// file's last byte with the same bytes (`ferry get -c`'s ``Validator`` comes from it, so
    /// the continuation's `If-Range` holds the server to that version).
    ///
    /// - Parameters:
    ///   - file: The file, `bytes` long, in the directory the download's partial files go to.
    ///   - request: The download's request (its URL, method and fields, credentials left out).
    ///   - response: The answer to the range that overlapped the file's end.
    ///   - totalLength: The representation's length, from that answer's `Content-Range`.
    /// - Throws: ``FerryError/Reason/fileSystem`` when the file cannot be flushed or renamed
    ///   (it is then left where it was).
    package static func adopting(
        _ file: URL,
        bytes: Int64,
        request: URLRequest,
        response: HTTPResponse,
        totalLength: Int64?
    ) throws(FerryError) -> ResumeData {
        let partial = file.deletingLastPathComponent().appendingPathComponent(PartialFile.newName())
        let descriptor = file.path.withCString { open($0, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) }
        guard descriptor >= 0 else { throw FileSystem.error("Cannot open '\(file.path)'") }
        let flushed = fsync(descriptor) == 0
        close(descriptor)
        guard flushed else { throw FileSystem.error("Cannot flush '\(file.path)'") }
        let renamed = file.path.withCString { from in partial.path.withCString { to in rename(from, to) } } == 0
        guard renamed else { throw FileSystem.error("Cannot move '\(file.path)' to continue it") }
        FileSystem.syncDirectory(partial.deletingLastPathComponent())
        let url = request.url ?? response.url
        return ResumeData(
            originalURL: url,
            currentURL: response.url,
            method: request.httpMethod ?? "GET",
            headers: request.allHTTPHeaderFields ?? [:],
            bytesOnDisk: bytes,
            totalLength: totalLength,
            validator: Validator(response: response),
            partialFile: partial
        )
    }
}
