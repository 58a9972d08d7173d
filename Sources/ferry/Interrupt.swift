import Dispatch
import Foundation
import Synchronization

/// Ctrl-C as the commands take it: a transfer stops cleanly (keeping its bytes where it can)
/// instead of the process dying mid-write.
enum Interrupt {
    /// Runs `handler` on SIGINT instead of dying, so the transfer can stop cleanly.
    ///
    /// - Parameter handler: Called on a global queue at each SIGINT.
    /// - Returns: The signal source; the handler runs as long as it is kept.
    static func handle(_ handler: @escaping @Sendable () -> Void) -> any DispatchSourceSignal {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler(handler: handler)
        source.resume()
        return source
    }
}

/// Set once from a signal handler, read after the transfer ends.
final class InterruptFlag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
