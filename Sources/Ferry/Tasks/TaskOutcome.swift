import Foundation

/// What a finished task hands out besides its response.
enum TaskOutcome: Sendable {
    /// A data or upload task's body.
    case data(Data)
    /// A download's file: at its destination, or handed over to the caller.
    case file(URL)
    /// A data task whose body went to a download task.
    case becameDownload
    /// A data task whose connection went to a stream task.
    case becameStreamTask
    /// A streamed body, already handed to its reader (``Session/bytes(for:)``).
    case streamed

    var data: Data? {
        switch self {
        case .data(let data): data
        // A 101's and a CONNECT's 2xx have no body: the bytes after them are the stream's.
        case .becameStreamTask: Data()
        case .file, .becameDownload, .streamed: nil
        }
    }

    var file: URL? {
        if case .file(let url) = self { return url }
        return nil
    }
}
