import Ferry
import Foundation
import Logging
import Synchronization

/// `-v`: the library's debug log shown as curl shows its conversation, on standard error:
/// `> ` request heads, `< ` response heads, `* ` everything else Ferry says (redirects,
/// retries, resume decisions). The library redacts credentials before they get here.
enum VerboseLog {
    static func logger() -> Logger {
        var logger = Logger(label: "ferry") { _ in Handler() }
        logger.logLevel = .debug
        return logger
    }

    /// Serializes writes so that the lines of one head stay together.
    private static let output = Mutex(())

    /// A response's trailer fields, after its body, as `curl -v` shows them (`< name: value`).
    static func show(trailers: HeaderFields) {
        let text = trailers.map { "< \($0.name): \($0.value)\n" }.joined()
        output.withLock { _ in FileHandle.standardError.write(Data(text.utf8)) }
    }

    struct Handler: LogHandler {
        var logLevel: Logger.Level = .debug
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = metadata
            all.merge(event.metadata ?? [:]) { _, new in new }
            let text: String
            if case .string(let kind)? = all["ferry-head-kind"], case .string(let head)? = all["ferry-head"] {
                let mark = kind == "request" ? ">" : "<"
                // An HTTP/2 request's header block first, as curl says it.
                var notes = ""
                if case .string(let said)? = all["ferry-head-notes"], !said.isEmpty {
                    notes = said.split(separator: "\n").map { "* \($0)\n" }.joined()
                }
                text =
                    notes
                    + head.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { "\(mark) \($0)\n" }.joined() + "\(mark)\n"
            } else {
                let details = all.filter { $0.key != "ferry-task" }.sorted { $0.key < $1.key }
                    .map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                text = "* \(event.message)\(details.isEmpty ? "" : " (\(details))")\n"
            }
            VerboseLog.output.withLock { _ in FileHandle.standardError.write(Data(text.utf8)) }
        }
    }
}
