/// Whether upload tasks use the resumable-upload protocol (draft-ietf-httpbis-resumable-upload)
/// when the server offers it.
///
/// With ``automatic`` (the default, as URLSession does on Apple platforms), an upload whose
/// body can be produced again (data, a file, a body provider, a replayable multipart form)
/// and is at least ``minimumSize`` bytes first asks the target with `OPTIONS` whether it
/// offers resumable uploads. If it does, the upload goes to an upload resource the server
/// creates, and a dropped connection or a transient status continues from the offset the
/// server holds, under the task's ``RetryPolicy``: bytes the server acknowledged are never
/// sent again. A server that does not offer them gets the ordinary upload, one `OPTIONS`
/// request later.
///
/// ```swift
/// configuration.resumableUploads = .disabled                      // never ask
/// configuration.resumableUploads = .automatic(minimumSize: 0)     // ask for every upload
/// ```
///
/// tus 1.0 (tus.io: core, creation with `Upload-Metadata`, termination) is the protocol of
/// many upload services; it is chosen for a task (or a session) with ``tus(metadata:)``,
/// and the request's URL is then the tus creation endpoint:
///
/// ```swift
/// let task = session.uploadTask(with: URLRequest(url: creationURL, method: .post), fromFile: video)
/// task.resumableUploads = .tus(metadata: ["filename": "video.mp4"])
/// task.resume()   // task.uploadURL names the upload once the server created it
/// ```
public struct ResumableUploadPolicy: Sendable, Equatable {
    /// Whether uploads ask the server.
    public var isEnabled: Bool
    /// Uploads smaller than this many bytes are sent as they are, without asking (the IETF
    /// draft only: a tus upload always goes to the tus server).
    public var minimumSize: Int64
    /// The protocol: the IETF draft, or tus 1.0 with this metadata.
    enum UploadProtocol: Sendable, Equatable {
        case ietfDraft
        case tus(metadata: [String: String])
    }
    let uploadProtocol: UploadProtocol

    /// Ask the server for uploads of at least 1 MiB (or of unknown length).
    public static let automatic = ResumableUploadPolicy(isEnabled: true, minimumSize: 1 << 20)
    /// Never use the protocol: every upload is one ordinary request.
    public static let disabled = ResumableUploadPolicy(isEnabled: false, minimumSize: 0)

    /// Ask the server for uploads of at least `minimumSize` bytes (or of unknown length).
    public static func automatic(minimumSize: Int64) -> ResumableUploadPolicy {
        ResumableUploadPolicy(isEnabled: true, minimumSize: max(0, minimumSize))
    }

    /// tus 1.0: the request's URL is the creation endpoint (`POST`); `metadata` goes in
    /// `Upload-Metadata` (values base64-encoded). A server that does not answer `OPTIONS` as
    /// a tus 1.0 server with the creation extension fails the task.
    public static func tus(metadata: [String: String] = [:]) -> ResumableUploadPolicy {
        ResumableUploadPolicy(isEnabled: true, minimumSize: 0, uploadProtocol: .tus(metadata: metadata))
    }

    private init(isEnabled: Bool, minimumSize: Int64, uploadProtocol: UploadProtocol = .ietfDraft) {
        self.isEnabled = isEnabled
        self.minimumSize = minimumSize
        self.uploadProtocol = uploadProtocol
    }
}
