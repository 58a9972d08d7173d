import NIOCore

extension EventLoopPromise {
    /// Fails the promise with `error` after `timeout`, unless it is completed first.
    func fail(after timeout: TimeAmount, with error: @escaping @Sendable () -> any Error) {
        let timer = futureResult.eventLoop.scheduleTask(in: timeout) { self.fail(error()) }
        futureResult.whenComplete { _ in timer.cancel() }
    }
}

extension EventLoopPromise where Value: Sendable {
    /// The promise's value; or `CancellationError` as soon as the calling Swift task is
    /// cancelled, which fails the promise with it (its other completers then find it done).
    func valueUnlessCancelled() async throws -> Value {
        try await withTaskCancellationHandler {
            try await futureResult.get()
        } onCancel: {
            fail(CancellationError())
        }
    }
}

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
        return try await outcome.valueUnlessCancelled()
    }
}
