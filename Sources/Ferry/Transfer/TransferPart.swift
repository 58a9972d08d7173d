import Logging

/// A part of one task's transfer, made for its plan (``Downloader``, ``DataLoad``,
/// ``Upgrader``): a value over the ``Transfer`` that reads what every plan shares — the task,
/// the session and its configuration, the options copied at `resume()`, the logger, the
/// engine — through it, and keeps its own work in its own files.
protocol TransferPart: Sendable {
    /// The transfer this part works for.
    var transfer: Transfer { get }
}

extension TransferPart {
    /// The task the transfer was started for.
    var task: SessionTask { transfer.task }
    /// The task the transfer was started for (the name the request loop uses).
    var origin: SessionTask { transfer.origin }
    var session: Session { transfer.session }
    var configuration: SessionConfiguration { transfer.configuration }
    var options: TransferOptions { transfer.options }
    var logger: Logger { transfer.logger }
    var engine: Engine { transfer.engine }
}
