public import Foundation

/// Resume data kept by key in a directory, so that an app (or `ferry get -c`) finds an
/// interrupted download again, even after a crash, without keeping its own
/// URL → resume data table.
///
/// A session with a store (``SessionConfiguration/resumeStore``) saves a download's resume
/// data under the task's ``SessionTask/resumeKey`` at every checkpoint and when the task
/// fails or is cancelled with resume data; it removes the entry when the task completes or
/// is cancelled without resume data. A task whose ``SessionTask/resumesFromStore`` is set
/// continues from the stored entry; otherwise a stored entry for its key is discarded, with
/// its partial file, and the download starts over.
///
/// By default entries are JSON files named `.ferry-resume-<hash>.json` in a directory, each
/// holding its key; writes go through a temporary file and a rename. A ``ResumeStorage`` of
/// your own (a database: the background daemon keeps them in SQLite) replaces the files.
public struct ResumeStore: Sendable, Equatable {
    /// Where the entries live, when they are files.
    public let directory: URL?
    let storage: (any ResumeStorage)?

    /// A store that keeps each download's resume data as a file in `directory`.
    public init(directory: URL) {
        self.directory = directory
        storage = nil
    }

    /// Entries kept by `storage`.
    public init(storage: any ResumeStorage) {
        directory = nil
        self.storage = storage
    }

    public static func == (lhs: ResumeStore, rhs: ResumeStore) -> Bool {
        lhs.directory == rhs.directory
            && lhs.storage.map(ObjectIdentifier.init) == rhs.storage.map(ObjectIdentifier.init)
    }

    struct Entry: Codable {
        var key: String
        var resumeData: ResumeData
    }

    func fileURL(for key: String, in directory: URL, kind: String = "resume") -> URL {
        // FNV-1a, 64 bits: a stable name; the key inside the file settles collisions.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0100_0000_01b3
        }
        // A file's name: no need to ask the file system whether it is a directory.
        return directory.appendingPathComponent(".ferry-\(kind)-\(String(hash, radix: 16)).json", isDirectory: false)
    }

    /// The resume data stored for `key`, if any and valid.
    public func resumeData(for key: String) -> ResumeData? { slot(for: key).resumeData() }

    /// The JSON of `field` in the entry file `file`, when that file holds `key`'s entry.
    func entry(for key: String, in file: URL, field: String) -> Data? {
        // Most downloads have no entry: asking first spares Foundation's error for a missing
        // file (about eight allocations per download of a long list).
        guard file.path.withCString({ access($0, F_OK) }) == 0, let data = try? Data(contentsOf: file),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            object["key"] as? String == key,
            let inner = object[field]
        else { return nil }
        return try? JSONSerialization.data(withJSONObject: inner)
    }

    /// Stores `resumeData` under `key`, replacing what was there.
    public func save(_ resumeData: ResumeData, for key: String) throws {
        try slot(for: key).save(resumeData)
    }

    func write(_ entry: some Encodable, to file: URL, in directory: URL) throws {
        try FileSystem.createDirectory(directory, mode: 0o700)
        let data: Data
        do {
            data = try ResumeJSON.encode(entry)
        } catch {
            throw FerryError(.fileSystem, "Cannot encode resume data.", underlying: error)
        }
        try FileSystem.writeAtomically(data, to: file)
    }

    /// Removes the entry for `key`.
    public func remove(_ key: String) { slot(for: key).remove() }

    // MARK: Uploads

    private struct UploadEntry: Codable {
        var key: String
        var uploadResumeData: UploadResumeData
    }

    /// The upload resume data stored for `key`, if any and valid. Upload entries are files of
    /// their own (`.ferry-upload-<hash>.json`): a download and an upload may share a key.
    public func uploadResumeData(for key: String) -> UploadResumeData? {
        guard let directory else { return storage?.uploadResumeData(for: key) }
        return entry(for: key, in: fileURL(for: key, in: directory, kind: "upload"), field: "uploadResumeData")
            .flatMap { try? UploadResumeData(decoding: $0) }
    }

    /// Stores an upload's `resumeData` under `key`, replacing what was there.
    public func save(_ resumeData: UploadResumeData, for key: String) throws {
        guard let directory else {
            try storage?.save(resumeData, for: key)
            return
        }
        let file = fileURL(for: key, in: directory, kind: "upload")
        try write(UploadEntry(key: key, uploadResumeData: resumeData), to: file, in: directory)
    }

    /// Removes the upload entry for `key`.
    public func removeUpload(_ key: String) {
        guard let directory else { return storage?.removeUpload(key) ?? () }
        FileSystem.removeIfPresent(fileURL(for: key, in: directory, kind: "upload"))
    }
}

/// Where a ``ResumeStore`` keeps its entries when they are not files: one ``ResumeData`` per
/// key. Called from the transfer at each checkpoint (about once a second or every 4 MiB),
/// from any thread; a call must be done with the entry durable when it returns.
public protocol ResumeStorage: AnyObject, Sendable {
    /// The resume data kept for `key`, or `nil`.
    func resumeData(for key: String) -> ResumeData?
    /// Keeps `resumeData` for `key`, replacing what was there.
    func save(_ resumeData: ResumeData, for key: String) throws
    /// Forgets what was kept for `key`.
    func remove(_ key: String)
    /// The upload resume data kept for `key`, or `nil`.
    func uploadResumeData(for key: String) -> UploadResumeData?
    /// Keeps an upload's `resumeData` for `key`, replacing what was there.
    func save(_ resumeData: UploadResumeData, for key: String) throws
    /// Forgets the upload resume data kept for `key`.
    func removeUpload(_ key: String)
}

extension ResumeStorage {
    /// A storage written before uploads resumed keeps none: `nil`.
    public func uploadResumeData(for key: String) -> UploadResumeData? { nil }
    /// A storage written before uploads resumed keeps none: nothing is kept.
    public func save(_ resumeData: UploadResumeData, for key: String) throws {}
    /// A storage written before uploads resumed keeps none: nothing to forget.
    public func removeUpload(_ key: String) {}
}
