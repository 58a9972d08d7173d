import NIOCore

extension EventLoopFuture where Value == any Channel {
    /// The channel this connect gives, or `CancellationError` as soon as the calling Swift
    /// task is cancelled, without waiting for the connect to end (a host that drops
    /// packets keeps it in SYN_SENT until its connect timeout).
    ///
    /// A channel that connects after the caller gave up is closed at once.
    func channelUnlessCancelled() async throws -> any Channel {
        let outcome = eventLoop.makePromise(of: (any Channel).self)
        cascade(to: outcome)
        outcome.futureResult.whenFailure { [self] _ in
            whenSuccess { $0.close(promise: nil) }
        }
        return try await withTaskCancellationHandler {
            try await outcome.futureResult.get()
        } onCancel: {
            outcome.fail(CancellationError())
        }
    }
}
