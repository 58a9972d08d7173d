public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Everything needed to continue an interrupted download later, in this process or another.
///
/// A versioned, `Codable` value (JSON on disk; the format is documented in
/// `docs/ResumeData.md`). It names the partial file and how many of its bytes were flushed
/// to disk, the validator that identifies the version of the resource those bytes belong to,
/// and the request that continues it, without credentials (they are re-applied from the
/// session or the new request).
///
/// ```swift
/// let data = await task.cancelProducingResumeData()
/// try data?.encoded().write(to: stateFile)
/// // later, maybe after a restart:
/// let resume = try ResumeData(decoding: Data(contentsOf: stateFile))
/// let task = session.downloadTask(withResumeData: resume, to: .file(destination))
/// ```
public struct ResumeData: Codable, Sendable, Equatable {
    /// The format this build writes and reads.
    public static let currentVersion = 1

    /// The format version.
    public var version: Int
    /// The URL the download was created with.
    public var originalURL: URL
    /// The URL that answered last (after redirects).
    public var currentURL: URL
    /// The request method (`GET` for every download Ferry makes today).
    public var method: String
    /// Request header fields to send again, credentials removed.
    public var headers: [String: String]
    /// Bytes of the partial file known to be on stable storage, all from one version.
    public var bytesOnDisk: Int64
    /// The representation's length, when the server said.
    public var totalLength: Int64?
    /// The strong validator of the version the bytes belong to; `nil` when the server gave none.
    public var validator: Validator?
    /// The partial file.
    public var partialFile: URL
    /// When this resume data was made.
    public var createdAt: Date
    /// For a download split across connections (``SessionConfiguration/maximumConnectionsPerDownload``):
    /// each segment's range and how far it came; `nil` for one connection. ``bytesOnDisk``
    /// is then the prefix written without a gap, which a reader that knows nothing of
    /// segments may still trust.
    public var segments: [Segment]?

    /// The boot of the machine (``FileSystem/bootID``) in which the download wrote this
    /// resume data. ``bytesOnDisk`` are the bytes flushed to stable storage, which survive a
    /// power loss; within the same boot, the bytes a process wrote after them survive its
    /// death too (a `kill -9`, a crash), so a continuation in that boot keeps a
    /// single-connection partial file as long as it is (``keepsWrittenBytes``). `nil` in
    /// resume data from before this field, or where there is no boot id: only
    /// ``bytesOnDisk`` count.
    var bootID: String?

    /// Whether a continuation may keep the partial file's bytes past ``bytesOnDisk``: one
    /// connection wrote them in order, in this boot.
    var keepsWrittenBytes: Bool {
        segments == nil && bootID != nil && bootID == FileSystem.bootID
    }

    /// The bytes on disk this resume data continues: every segment's, or ``bytesOnDisk``.
    public var bytesKept: Int64 {
        segments?.reduce(0) { $0 + ($1.next - $1.start) } ?? bytesOnDisk
    }

    /// The bytes of the partial file a continuation keeps: ``bytesOnDisk``, or for a split
    /// download the whole length (its segments say which bytes count).
    var partialFileLength: Int64 {
        segments == nil ? bytesOnDisk : totalLength ?? bytesOnDisk
    }

    /// One part of a split download: the bytes `start..<end`, written up to `next`.
    public struct Segment: Codable, Sendable, Equatable {
        /// The segment's first byte in the file.
        public var start: Int64
        /// The next byte to fetch: `start..<next` is on disk.
        public var next: Int64
        /// The byte after the segment's last.
        public var end: Int64

        /// A segment of the bytes `start..<end`, written up to `next`.
        public init(start: Int64, next: Int64, end: Int64) {
            self.start = start
            self.next = next
            self.end = end
        }

        var remaining: Int64 { end - next }
        var isDone: Bool { next >= end }
    }

    static let credentialHeaders = HeaderFields.credentialNames

    init(
        originalURL: URL,
        currentURL: URL,
        method: String = "GET",
        headers: [String: String],
        bytesOnDisk: Int64,
        totalLength: Int64?,
        validator: Validator?,
        partialFile: URL,
        createdAt: Date = Date()
    ) {
        self.version = Self.currentVersion
        self.originalURL = originalURL
        self.currentURL = currentURL
        self.method = method
        self.headers = headers.filter { !Self.credentialHeaders.contains($0.key.lowercased()) }
        self.bytesOnDisk = bytesOnDisk
        self.totalLength = totalLength
        self.validator = validator
        self.partialFile = partialFile
        self.createdAt = Self.wholeSeconds(createdAt)
    }

    /// The JSON form keeps whole seconds; so does the value, so that it round-trips exactly.
    static func wholeSeconds(_ date: Date) -> Date {
        Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down))
    }

    /// Decodes and checks resume data. Foreign, corrupt or inconsistent data is a
    /// ``FerryError/Reason/invalidResumeData`` error, never a crash.
    public init(decoding data: Data) throws(FerryError) {
        let decoded: ResumeData
        do {
            decoded = try ResumeJSON.decode(ResumeData.self, from: data)
        } catch {
            throw FerryError(.invalidResumeData, "The resume data is not Ferry resume data.", underlying: error)
        }
        guard decoded.version == Self.currentVersion else {
            throw FerryError(
                .invalidResumeData,
                "The resume data has format version \(decoded.version); this build reads \(Self.currentVersion)."
            )
        }
        guard decoded.bytesOnDisk >= 0, decoded.totalLength.map({ $0 >= decoded.bytesOnDisk }) ?? true,
            decoded.partialFile.isFileURL, ["http", "https"].contains(decoded.currentURL.scheme?.lowercased() ?? "")
        else {
            throw FerryError(.invalidResumeData, "The resume data is inconsistent.")
        }
        self = decoded
    }

    /// The JSON form (sorted keys, ISO 8601 dates).
    public func encoded() -> Data {
        // Encoding plain values cannot fail; an empty object is never produced in practice.
        (try? ResumeJSON.encode(self)) ?? Data("{}".utf8)
    }
}

/// The JSON form of resume data (a download's and an upload's, and a store's entries): sorted
/// keys, indented, ISO 8601 dates.
enum ResumeJSON {
    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        encoder.dateEncodingStrategy = Timestamp.encoding()
        return try encoder.encode(value)
    }

    static func decode<Value: Decodable>(_ type: Value.Type, from data: Data) throws -> Value {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = Timestamp.decoding
        return try decoder.decode(type, from: data)
    }
}

extension URLRequest {
    /// The request that continues the download `resumeData` describes: its URL, method and
    /// header fields, with `headers` added over them (credentials, which resume data never
    /// keeps).
    init(resuming resumeData: ResumeData, headers: [String: String]) {
        self.init(url: resumeData.currentURL)
        method = HTTPMethod(rawValue: resumeData.method)
        for (name, value) in resumeData.headers.merging(headers, uniquingKeysWith: { _, new in new }) {
            setValue(value, forHTTPHeaderField: name)
        }
    }
}
