public import Foundation

/// Where a finished download goes: a closure `(temporaryURL, response) -> URL` and options.
///
/// The file is moved by `rename(2)` when it can (the destination then appears complete in
/// one step and an existing file is replaced atomically), else copied beside the destination,
/// flushed, and renamed into place. A failed move fails the task and is published as
/// ``TaskEvent/failedToMoveDownload(_:)``.
///
/// ```swift
/// session.downloadTask(with: url, to: .file(URL(fileURLWithPath: "out.iso")))
/// session.downloadTask(with: url, to: .directory(downloads))   // server-suggested, sanitized name
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

    /// A destination chosen by `resolve` from the temporary file and the response.
    public init(
        options: Options = [],
        _ resolve: @escaping @Sendable (_ temporaryURL: URL, _ response: HTTPResponse) throws -> URL
    ) {
        self.resolve = resolve
        self.options = options
        self.fixedURL = nil
    }

    private init(fixed url: URL, options: Options) {
        self.resolve = { _, _ in url }
        self.options = options
        self.fixedURL = url
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
    case upload(RequestBody)
    case download(DownloadDelivery, resume: ResumeData?)
}
