package import NIOCore
package import NIOPosix
import Synchronization

#if canImport(Darwin)
import Darwin
#endif

/// Accepts connections without NIO's async server channel: each accepted channel is wrapped
/// in an `NIOAsyncChannel` and handed to its own serving task at once.
///
/// With the async server channel, connections accepted while the listener closes wait in a
/// buffer that closing drops, and a dropped `NIOAsyncChannel` traps ("Deinited
/// NIOAsyncWriter without calling finish()", swift-nio#2813); a test suite that starts and
/// stops servers all the time hit it now and then. Here nothing waits in a buffer: every
/// accepted connection is served or, after ``close()``, finished at once.
///
/// ## Lifecycle and threading
/// ``bind(_:_:wrap:)`` listens; ``start(serving:)`` sets the handler (connections
/// arriving before it wait for it); ``close()`` stops listening and returns once every
/// serving task has ended (the owner closes the connections themselves).
package final class ConnectionAcceptor<Inbound: Sendable, Outbound: Sendable>: Sendable {
    package typealias Connection = NIOAsyncChannel<Inbound, Outbound>
    package typealias Serve = @Sendable (Connection) async -> Void

    private struct State {
        var serve: Serve?
        var waiting: [Connection] = []
        var tasks: [Int: Task<Void, Never>] = [:]
        var next = 0
        var closed = false
    }

    private let state = Mutex(State())
    private let listener = Mutex<(any Channel)?>(nil)

    /// The port it listens on.
    package var port: Int { listener.withLock { $0?.localAddress?.port } ?? 0 }

    /// Where to listen.
    package enum Address: Sendable {
        case host(String, port: Int)
        /// A Unix domain socket; an existing file at the path is replaced.
        case unixSocket(String)
        /// A Unix domain socket only its owner can connect to: on Linux the socket is made
        /// 0600 before it is bound, and the file it creates has that mode from its first
        /// moment, without touching the process-wide umask (elsewhere it is made 0600 right
        /// after). An existing file at the path is replaced.
        case privateUnixSocket(String)
    }

    /// Listens at `address`; `wrap` sets up each accepted channel's pipeline and wraps it
    /// (on its event loop).
    package static func bind(
        _ bootstrap: ServerBootstrap,
        _ address: Address,
        wrap: @escaping @Sendable (any Channel) throws -> Connection
    ) async throws -> ConnectionAcceptor {
        let acceptor = ConnectionAcceptor()
        let configured = bootstrap.childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                acceptor.accept(try wrap(channel))
            }
        }
        let channel: any Channel
        switch address {
        case .host(let host, let port):
            channel = try await configured.bind(host: host, port: port).get()
        case .unixSocket(let path):
            channel = try await configured.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
        case .privateUnixSocket(let path):
            #if os(Linux)
            channel = try await configured.withBoundSocket(try PrivateSocket.listen(at: path)).get()
            #else
            channel = try await configured.bind(unixDomainSocketPath: path, cleanupExistingSocketFile: true).get()
            chmod(path, 0o600)
            #endif
        }
        acceptor.listener.withLock { $0 = channel }
        return acceptor
    }

    /// The socket path or address it listens on.
    package var localAddress: SocketAddress? { listener.withLock { $0?.localAddress } }

    /// Serves every connection, those that already wait included, with `serve`.
    package func start(serving serve: @escaping Serve) {
        let waiting = state.withLock { state in
            state.serve = serve
            defer { state.waiting = [] }
            return state.waiting
        }
        for connection in waiting { accept(connection) }
    }

    private func accept(_ connection: Connection) {
        state.withLock { state in
            guard let serve = state.serve, !state.closed else {
                if state.closed {
                    Task { try? await connection.executeThenClose { _, _ in } }
                } else {
                    state.waiting.append(connection)
                }
                return
            }
            let id = state.next
            state.next += 1
            state.tasks[id] = Task {
                await serve(connection)
                self.state.withLock { _ = $0.tasks.removeValue(forKey: id) }
            }
        }
    }

    /// Stops listening, then waits for every serving task.
    package func close() async {
        let waiting = state.withLock { state in
            state.closed = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for connection in waiting { try? await connection.executeThenClose { _, _ in } }
        try? await listener.withLock { $0 }?.close()
        while let task = state.withLock({ $0.tasks.values.first }) { await task.value }
    }

    /// Returns when the listener has closed and every serving task has ended.
    package func wait() async {
        try? await listener.withLock { $0 }?.closeFuture.get()
        while let task = state.withLock({ $0.tasks.values.first }) { await task.value }
    }
}
