import FerryServerSupport
import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// A proxy on loopback for the proxy tests: HTTP `CONNECT` (RFC 9110 §9.3.6) or SOCKS5
/// (RFC 1928, no authentication), tunnelling bytes to the target it is asked for and logging
/// each tunnel.
public final class TunnelProxy: Sendable {
    public enum Kind: Sendable {
        /// `CONNECT host:port`; when `requiredAuthorization` is set, a request without that
        /// exact `Proxy-Authorization` gets `407`.
        case httpConnect(requiredAuthorization: String?)
        case socks5
    }

    /// One tunnel asked for.
    public struct Tunnel: Sendable, Equatable {
        /// `host:port`.
        public var target: String
        /// The `Proxy-Authorization` the client sent (HTTP only).
        public var authorization: String?
        /// Whether the proxy opened it.
        public var opened: Bool

        public init(target: String, authorization: String?, opened: Bool) {
            self.target = target
            self.authorization = authorization
            self.opened = opened
        }
    }

    public let port: Int
    private let kind: Kind
    private let acceptor: ConnectionAcceptor<ByteBuffer, ByteBuffer>
    private let log = Mutex<[Tunnel]>([])

    /// Every tunnel asked for so far, in order.
    public var tunnels: [Tunnel] { log.withLock { $0 } }

    private init(kind: Kind, acceptor: ConnectionAcceptor<ByteBuffer, ByteBuffer>) {
        self.kind = kind
        self.acceptor = acceptor
        self.port = acceptor.port
    }

    /// Starts a proxy of `kind` on 127.0.0.1 and a free port.
    public static func start(_ kind: Kind) async throws -> TunnelProxy {
        let acceptor = try await ConnectionAcceptor<ByteBuffer, ByteBuffer>.bind(
            ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1),
            .host("127.0.0.1", port: 0)
        ) { channel in
            try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
        }
        let proxy = TunnelProxy(kind: kind, acceptor: acceptor)
        acceptor.start { [weak proxy] connection in
            if let proxy {
                try? await proxy.serve(connection)
            } else {
                try? await connection.executeThenClose { _, _ in }
            }
        }
        return proxy
    }

    /// Stops accepting; open tunnels end with their connections.
    public func shutdown() async {
        await acceptor.close()
    }

    private struct Refused: Error {}

    private func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async throws {
        try await connection.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            var pending = ByteBuffer()
            /// Reads until `pending` holds at least `count` bytes.
            func need(_ count: Int) async throws {
                while pending.readableBytes < count {
                    guard var more = try await iterator.next() else { throw Refused() }
                    pending.writeBuffer(&more)
                }
            }
            let host: String
            let port: Int
            switch kind {
            case .httpConnect(let required):
                var head = ""
                while true {
                    if let view = pending.getString(at: pending.readerIndex, length: pending.readableBytes),
                        let end = view.range(of: "\r\n\r\n")
                    {
                        head = String(view[..<end.lowerBound])
                        pending.moveReaderIndex(
                            forwardBy: view.utf8.distance(from: view.startIndex, to: end.upperBound)
                        )
                        break
                    }
                    try await need(pending.readableBytes + 1)
                }
                let lines = head.components(separatedBy: "\r\n")
                let requestLine = lines.first?.split(separator: " ") ?? []
                let authorization = lines.dropFirst().first { $0.lowercased().hasPrefix("proxy-authorization:") }
                    .map { String($0.dropFirst("proxy-authorization:".count)).trimmingCharacters(in: .whitespaces) }
                guard requestLine.count == 3, requestLine[0] == "CONNECT",
                    let colon = requestLine[1].lastIndex(of: ":"),
                    let parsedPort = Int(requestLine[1][requestLine[1].index(after: colon)...])
                else {
                    try await outbound.write(
                        ByteBuffer(string: "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                    )
                    return
                }
                host = String(requestLine[1][..<colon])
                port = parsedPort
                if let required, authorization != required {
                    log.withLock {
                        $0.append(Tunnel(target: "\(host):\(port)", authorization: authorization, opened: false))
                    }
                    try await outbound.write(
                        ByteBuffer(
                            string:
                                "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"proxy\"\r\nContent-Length: 0\r\n\r\n"
                        )
                    )
                    return
                }
                log.withLock {
                    $0.append(Tunnel(target: "\(host):\(port)", authorization: authorization, opened: true))
                }
            case .socks5:
                try await need(2)
                let methods = Int(pending.getInteger(at: pending.readerIndex + 1, as: UInt8.self) ?? 0)
                try await need(2 + methods)
                pending.moveReaderIndex(forwardBy: 2 + methods)
                try await outbound.write(ByteBuffer(bytes: [5, 0]))
                try await need(5)
                let type = pending.getInteger(at: pending.readerIndex + 3, as: UInt8.self) ?? 0
                let addressLength: Int
                switch type {
                case 1: addressLength = 4
                case 4: addressLength = 16
                case 3: addressLength = 1 + Int(pending.getInteger(at: pending.readerIndex + 4, as: UInt8.self) ?? 0)
                default: throw Refused()
                }
                try await need(4 + addressLength + 2)
                pending.moveReaderIndex(forwardBy: 4)
                let address = pending.readBytes(length: addressLength) ?? []
                switch type {
                case 1: host = address.map(String.init).joined(separator: ".")
                case 3: host = String(decoding: address.dropFirst(), as: UTF8.self)
                default: host = "::1"
                }
                port = Int(pending.readInteger(as: UInt16.self) ?? 0)
                log.withLock { $0.append(Tunnel(target: "\(host):\(port)", authorization: nil, opened: true)) }
            }
            let target = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: host, port: port) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            // Everything after the connect happens inside executeThenClose: a target channel
            // dropped without it (the client left before the reply, say) traps in NIO.
            try await target.executeThenClose { targetInbound, targetOutbound in
                switch kind {
                case .httpConnect:
                    try await outbound.write(ByteBuffer(string: "HTTP/1.1 200 Connection Established\r\n\r\n"))
                case .socks5: try await outbound.write(ByteBuffer(bytes: [5, 0, 0, 1, 0, 0, 0, 0, 0, 0]))
                }
                if pending.readableBytes > 0 { try await targetOutbound.write(pending) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await buffer in targetInbound { try await outbound.write(buffer) }
                        // The target closed: so does the client's side.
                        outbound.finish()
                    }
                    while let buffer = try await iterator.next() { try await targetOutbound.write(buffer) }
                    group.cancelAll()
                }
            }
        }
    }
}
