public import Foundation

/// Where a finished download goes: a closure `(temporaryURL, response) -> URL` and options.
///
/// The file is moved by `rename(2)` when it can (the destination then appears complete in
/// one step and an existing file is replaced atomically), else copied beside the destination,
/// flushed, and renamed into place. A failed move fails the task and is published as
/// ``TaskEvent/failedToMoveDownload(_:)``.
///
/// Not every destination is a file to replace. A ``file(_:options:)`` that names an existing
/// character device, FIFO or socket, or any path under `/dev` or `/proc` (`/dev/null`,
/// `/dev/stdout`), is never renamed over, created or truncated: the body is written into it
/// in order as it arrives, as ``stream(to:)`` does. Such a download has no partial file and
/// cannot be resumed.
///
/// ```swift
/// session.downloadTask(with: url, to: .file(URL(fileURLWithPath: "out.iso")))
/// session.downloadTask(with: url, to: .directory(downloads))   // server-suggested, sanitized name
/// session.downloadTask(with: url, to: .stream(to: .standardOutput))
/// ```
public struct DownloadDestination: Sendable {
    /// How to treat the destination's surroundings.
    public struct Options: OptionSet, Sendable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Create missing parent directories.
        public static let createIntermediateDirectories = Options(rawValue: 1 << 0)
        /// Replace an existing file (atomically); without it an existing file fails the task.
        public static let removePreviousFile = Options(rawValue: 1 << 1)
    }

    let resolve: @Sendable (_ temporaryURL: URL, _ response: HTTPResponse) throws -> URL
    let options: Options
    /// The destination when it is known before the response (``file(_:options:)``): the
    /// download claims it for its whole run.
    let fixedURL: URL?
    /// `fixedURL`'s path, worked out once: each download asks for it several times.
    let fixedPath: String?
    /// An open handle the body is written into in order (``stream(to:)``).
    let handle: FileHandle?
    /// Directories the file must still lie in (links resolved, by
    /// ``PathConfinement/resolved(_:)``) when it is moved into place.
    package private(set) var confinement: [String]?

    /// A destination chosen by `resolve` from the temporary file and the response.
    public init(
        options: Options = [],
        _ resolve: @escaping @Sendable (_ temporaryURL: URL, _ response: HTTPResponse) throws -> URL
    ) {
        self.resolve = resolve
        self.options = options
        self.fixedURL = nil
        self.fixedPath = nil
        self.handle = nil
    }

    private init(fixed url: URL, options: Options, handle: FileHandle? = nil) {
        self.resolve = { _, _ in url }
        self.options = options
        self.fixedURL = url
        self.fixedPath = FileSystem.path(url)
        self.handle = handle
    }

    /// Whether the body is written into this destination in order rather than into a partial
    /// file renamed over it: ``stream(to:)``, or a ``file(_:options:)`` that is a device,
    /// FIFO or socket or lies under `/dev` or `/proc`. Such a download cannot be resumed.
    public var isWrittenInOrder: Bool {
        if handle != nil { return true }
        return fixedURL.map(SequentialOutput.isSequential) ?? false
    }

    /// Writes the body into `handle` in order, as the bytes arrive: standard output, a pipe,
    /// a socket, a device.
    ///
    /// Nothing is buffered beyond a bounded read-ahead, and nothing is written to disk
    /// first. There is no partial file and no resume: a failure is retried (per the retry
    /// policy) only while no byte has been written, and is final after that. With
    /// ``SessionConfiguration/automaticDecompression`` the body is asked for with
    /// `Accept-Encoding` (gzip, deflate, and br and zstd where the system decodes them) and written decoded, as a data task's. The handle is
    /// not closed. The task's file URL is the handle's `/dev/fd/N`.
    public static func stream(to handle: FileHandle) -> DownloadDestination {
        DownloadDestination(
            fixed: URL(fileURLWithPath: "/dev/fd/\(handle.fileDescriptor)"),
            options: [],
            handle: handle
        )
    }

    /// A fixed file that must lie inside `directories` (symbolic links resolved, by
    /// ``PathConfinement/resolved(_:)``) when it is moved into place, or the move fails: the
    /// daemon's tasks, whose paths were judged when they were added and could have changed
    /// since.
    package static func file(_ url: URL, options: Options, confinedTo directories: [String]) -> DownloadDestination {
        var destination = DownloadDestination(fixed: url, options: options)
        destination.confinement = directories
        return destination
    }

    /// A fixed file.
    public static func file(
        _ url: URL,
        options: Options = [.createIntermediateDirectories, .removePreviousFile]
    )
        -> DownloadDestination
    {
        DownloadDestination(fixed: url, options: options)
    }

    /// A directory, with the response's ``HTTPResponse/suggestedFilename`` (always a safe base
    /// name, so the file stays inside `directory`).
    public static func directory(
        _ directory: URL,
        options: Options = [.createIntermediateDirectories, .removePreviousFile]
    ) -> DownloadDestination {
        DownloadDestination(options: options) { _, response in
            directory.appendingPathComponent(response.suggestedFilename, isDirectory: false)
        }
    }
}

/// What a download does with its finished file.
enum DownloadDelivery: Sendable {
    /// Move it to a destination.
    case destination(DownloadDestination)
    /// Hand it to the caller of an async API: it stays, renamed, in the temporary directory.
    case handOver
    /// Offer it to the delegate during `didFinishDownloadingTo`, then remove it.
    case delegate
}

/// What a task's transfer does with bodies.
enum TransferPlan: Sendable {
    case data
    /// The body goes, as it arrives, to the reader of ``Session/bytes(for:)``; the request's
    /// body is `body`, or when `nil` the request's own (`httpBody`, `httpBodyStream`).
    case stream(ResponseStreamSink, body: RequestBody?)
    /// A TCP connection of a ``StreamTask``: no HTTP.
    case socket(StreamConnection)
    case upload(RequestBody)
    case download(DownloadDelivery, resume: ResumeData?)
}
