import Ferry
package import Logging

/// A log handler that redacts every URL in a message and its metadata (passwords, signed
/// query parameters: ``Redaction``) before the handler it wraps writes it.
///
/// The daemon's log goes to the journal under systemd, which more people read than may
/// see a task's credentials; its lines name tasks by their URLs, and errors quote them.
///
/// ```swift
/// let logger = Logger(label: "ferry.daemon") { label in
///     RedactingLogHandler(StreamLogHandler.standardError(label: label))
/// }
/// ```
package struct RedactingLogHandler: LogHandler {
    private var base: any LogHandler

    /// - Parameter base: the handler that writes the redacted lines.
    package init(_ base: any LogHandler) { self.base = base }

    package var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    package var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    package var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    package func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: Redaction.redactingURLs(in: event.message.description))
        event.metadata = event.metadata.map { $0.mapValues(Self.redacted) }
        event.error = event.error.map { Redacted(text: Redaction.redactingURLs(in: "\($0)")) }
        base.log(event: event)
    }

    /// An error as its redacted description.
    private struct Redacted: Error, CustomStringConvertible {
        let text: String
        var description: String { text }
    }

    private static func redacted(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(Redaction.redactingURLs(in: text))
        case .stringConvertible(let value): .string(Redaction.redactingURLs(in: value.description))
        case .array(let values): .array(values.map(redacted))
        case .dictionary(let values): .dictionary(values.mapValues(redacted))
        }
    }
}
