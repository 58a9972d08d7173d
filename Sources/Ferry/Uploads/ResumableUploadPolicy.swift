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
public struct ResumableUploadPolicy: Sendable, Equatable {
    /// Whether uploads ask the server.
    public var isEnabled: Bool
    /// Uploads smaller than this many bytes are sent as they are, without asking.
    public var minimumSize: Int64

    /// Ask the server for uploads of at least 1 MiB (or of unknown length).
    public static let automatic = ResumableUploadPolicy(isEnabled: true, minimumSize: 1 << 20)
    /// Never use the protocol: every upload is one ordinary request.
    public static let disabled = ResumableUploadPolicy(isEnabled: false, minimumSize: 0)

    /// Ask the server for uploads of at least `minimumSize` bytes (or of unknown length).
    public static func automatic(minimumSize: Int64) -> ResumableUploadPolicy {
        ResumableUploadPolicy(isEnabled: true, minimumSize: max(0, minimumSize))
    }

    private init(isEnabled: Bool, minimumSize: Int64) {
        self.isEnabled = isEnabled
        self.minimumSize = minimumSize
    }
}
