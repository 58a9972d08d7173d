public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Everything needed to continue an interrupted resumable upload later, in this process or
/// another: the upload resource the server created, what it acknowledged, and the request
/// that began it (without credentials).
///
/// Made for an upload that went to an upload resource (``ResumableUploadPolicy``): by
/// ``UploadTask/cancelProducingResumeData()``, in a failed upload's
/// ``FerryError/uploadResumeData``, and kept under the task's ``SessionTask/resumeKey`` by a
/// session's ``ResumeStore`` from the moment the resource exists. A versioned, `Codable` value
/// (JSON on disk; the format is documented in `docs/ResumeData.md`).
///
/// ```swift
/// let data = await uploadTask.cancelProducingResumeData()
/// try data?.encoded().write(to: stateFile)
/// // later, maybe after a restart:
/// let resume = try UploadResumeData(decoding: Data(contentsOf: stateFile))
/// let task = session.uploadTask(withResumeData: resume)   // continues from the server's offset
/// ```
public struct UploadResumeData: Codable, Sendable, Equatable {
    /// The format this build writes and reads.
    public static let currentVersion = 1

    /// The format version.
    public var version: Int
    /// The protocol of the upload resource: `"ietf-draft"` (draft-ietf-httpbis-resumable-upload)
    /// or `"tus"` (tus 1.0).
    public var uploadProtocol: String
    /// The draft's interop version the server speaks (1 for tus 1.0.0).
    public var interopVersion: Int
    /// The URL the upload was made to (the target resource).
    public var targetURL: URL
    /// The target request's method.
    public var method: String
    /// The target request's header fields, credentials removed.
    public var headers: [String: String]
    /// The upload resource.
    public var uploadURL: URL
    /// The offset the server last acknowledged: bytes it holds for sure.
    public var bytesAcknowledged: Int64
    /// The furthest byte handed to a connection: the server can hold no more than this.
    public var bytesSent: Int64
    /// The body's length, when known.
    public var totalLength: Int64?
    /// The file the body is read from, for an upload from a file.
    public var sourceFile: URL?
    /// When the server may drop the upload resource (its `Upload-Limit: max-age`).
    public var expiresAt: Date?
    /// When this resume data was made.
    public var createdAt: Date

    /// The name of the draft's protocol in ``uploadProtocol``.
    static let ietfDraft = "ietf-draft"
    /// The name of tus 1.0 in ``uploadProtocol``.
    static let tus = "tus"

    init(
        tus: Bool = false,
        interopVersion: Int,
        request: URLRequest,
        uploadURL: URL,
        bytesAcknowledged: Int64,
        bytesSent: Int64,
        totalLength: Int64?,
        sourceFile: URL?,
        expiresAt: Date?,
        createdAt: Date = Date()
    ) {
        version = Self.currentVersion
        uploadProtocol = tus ? Self.tus : Self.ietfDraft
        self.interopVersion = interopVersion
        targetURL = request.url ?? uploadURL
        method = request.httpMethod ?? "POST"
        headers = (request.allHTTPHeaderFields ?? [:])
            .filter { !ResumeData.credentialHeaders.contains($0.key.lowercased()) }
        self.uploadURL = uploadURL
        self.bytesAcknowledged = bytesAcknowledged
        self.bytesSent = max(bytesSent, bytesAcknowledged)
        self.totalLength = totalLength
        self.sourceFile = sourceFile
        self.expiresAt = expiresAt.map(ResumeData.wholeSeconds)
        self.createdAt = ResumeData.wholeSeconds(createdAt)
    }

    /// Decodes and checks resume data. Foreign, corrupt or inconsistent data is a
    /// ``FerryError/Reason/invalidResumeData`` error, never a crash.
    public init(decoding data: Data) throws(FerryError) {
        let decoded: UploadResumeData
        do {
            decoded = try ResumeJSON.decode(UploadResumeData.self, from: data)
        } catch {
            throw FerryError(.invalidResumeData, "The data is not Ferry upload resume data.", underlying: error)
        }
        guard decoded.version == Self.currentVersion else {
            throw FerryError(
                .invalidResumeData,
                "The upload resume data has format version \(decoded.version); this build reads \(Self.currentVersion)."
            )
        }
        let web = ["http", "https"]
        guard [Self.ietfDraft, Self.tus].contains(decoded.uploadProtocol), decoded.bytesAcknowledged >= 0,
            decoded.bytesSent >= decoded.bytesAcknowledged,
            decoded.totalLength.map({ $0 >= decoded.bytesAcknowledged }) ?? true,
            web.contains(decoded.targetURL.scheme?.lowercased() ?? ""),
            Origin(decoded.uploadURL) == Origin(decoded.targetURL), decoded.sourceFile?.isFileURL ?? true
        else {
            throw FerryError(.invalidResumeData, "The upload resume data is inconsistent.")
        }
        self = decoded
    }

    /// The JSON form (sorted keys, ISO 8601 dates).
    public func encoded() -> Data {
        (try? ResumeJSON.encode(self)) ?? Data("{}".utf8)
    }

    /// The target request again, with `headers` (credentials) over the kept fields.
    func request(adding headers: [String: String]) -> URLRequest {
        var request = URLRequest(url: targetURL)
        request.httpMethod = method
        for (name, value) in self.headers.merging(headers, uniquingKeysWith: { _, new in new }) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        return request
    }
}
