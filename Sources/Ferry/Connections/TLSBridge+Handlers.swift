import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOPosix
import NIOSOCKS
import NIOSSL
import NIOTLS
import Synchronization

/// Completes a promise when the TLS handshake has, or fails it when the connection ends or
/// errs first.
final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let promise: EventLoopPromise<Void>
    private var done = false

    init(_ promise: EventLoopPromise<Void>) { self.promise = promise }

    func succeed() {
        guard !done else { return }
        done = true
        promise.succeed()
    }

    func fail(_ error: any Error) {
        guard !done else { return }
        done = true
        promise.fail(error)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            succeed()
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ChannelError.ioOnClosedChannel)
        context.fireChannelInactive()
    }
}

/// The proxy's `407`: what it asked for, for ``Transfer`` to answer.
struct ProxyChallenge: Error, Sendable {
    let proxy: Proxy
    /// Its `Proxy-Authenticate` fields.
    let challenges: [String]
}

/// Keeps the `Proxy-Authenticate` fields of a `407` answer to `CONNECT` (NIO's connect
/// handler reports the status only).
final class ChallengeObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart
    private(set) var challenges: [String]?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head(let head) = unwrapInboundIn(data), head.status.code == 407 {
            challenges = head.headers[canonicalForm: "Proxy-Authenticate"].map(String.init)
        }
        context.fireChannelRead(data)
    }
}

/// Runs `active` once the connection is up (the channel initializer runs before that).
final class ActiveWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let active: () throws -> Void

    init(_ active: @escaping () throws -> Void) { self.active = active }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        do {
            try active()
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        } catch {
            context.fireErrorCaught(error)
        }
    }
}

/// Runs `established` once the SOCKS proxy has opened the tunnel.
final class SOCKSWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    private let established: () throws -> Void

    init(_ established: @escaping () throws -> Void) { self.established = established }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is SOCKSProxyEstablishedEvent {
            do {
                try established()
                context.pipeline.syncOperations.removeHandler(self, promise: nil)
            } catch {
                context.fireErrorCaught(error)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Opens a tunnel through a SOCKS5 proxy that wants a user name and password (RFC 1928 +
/// RFC 1929; NIO's `SOCKSClientHandler` offers no authentication): performs the
/// ``SOCKS5Handshake``'s decisions, then runs `established`, passes on any bytes that came
/// with the proxy's last reply, and leaves the pipeline.
final class SOCKS5Handler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var handshake: SOCKS5Handshake
    private var buffered = ByteBuffer()
    private let established: () throws -> Void

    init(_ handshake: SOCKS5Handshake, established: @escaping () throws -> Void) {
        self.handshake = handshake
        self.established = established
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { perform(handshake.start(), context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if handshake.phase == .idle { perform(handshake.start(), context: context) }
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffered.writeBuffer(&bytes)
        perform(handshake.received(&buffered), context: context)
    }

    private func perform(_ action: SOCKS5Handshake.Action, context: ChannelHandlerContext) {
        switch action {
        case .send(let bytes):
            context.writeAndFlush(NIOAny(bytes), promise: nil)
        case .needMore:
            break
        case .established(let leftover):
            do {
                try established()
            } catch {
                context.fireErrorCaught(error)
                return
            }
            if leftover.readableBytes > 0 { context.fireChannelRead(wrapInboundOut(leftover)) }
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        case .fail(let error):
            context.fireErrorCaught(error)
            context.close(promise: nil)
        }
    }
}
