import Foundation

/// What a finished task hands out besides its response.
enum TaskOutcome: Sendable {
    /// A data or upload task's body.
    case data(Data)
    /// A download's file: at its destination, or handed over to the caller.
    case file(URL)
    /// A data task whose body went to a download task.
    case becameDownload
    /// A streamed body, already handed to its reader (``Session/bytes(for:)``).
    case streamed

    var data: Data? {
        if case .data(let data) = self { return data }
        return nil
    }

    var file: URL? {
        if case .file(let url) = self { return url }
        return nil
    }
}
