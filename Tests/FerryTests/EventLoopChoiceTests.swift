import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import Ferry

/// The engine's per-request choices that depend on what else runs to the same origin: the
/// event loop, whether the connection is pinned to it, the read-ahead; and its clients'
/// tracing.
@Suite("Engine choices: one loop per origin, turns, HTTP/2 pinning, shared read-ahead")
struct EventLoopChoiceTests {
    /// A session allowing `connections` per host.
    private func session(connections: Int = 6) throws -> Session {
        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = connections
        return try Session(configuration: configuration)
    }

    /// Takes one of `origin`'s slots, as a running transfer does.
    private func hold(_ origin: Origin, in engine: Engine) async throws -> HostLimiter.Reservation {
        let reservation = engine.limiter.reserve(for: origin, priority: 0.5)
        try await engine.limiter.acquire(reservation)
        return reservation
    }

    @Test func anOriginsOnlyRequestAlwaysGetsItsOwnLoop() throws {
        let session = try session()
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://example.test:8080/a")!
        let first = session.engine.eventLoop(for: Origin(url))
        for path in ["/b", "/c?d", "/"] {
            let next = session.engine.eventLoop(for: Origin(URL(string: "http://EXAMPLE.test:8080\(path)")!))
            #expect(next === first, "sequential requests to one origin must share a loop (no hop)")
        }
    }

    @Test func concurrentRequestsToOneOriginTakeTurns() async throws {
        let session = try session(connections: 4)
        defer { session.invalidateAndCancel() }
        let engine = session.engine
        let url = URL(string: "http://example.test/")!
        let origin = Origin(url)
        let loopCount = Array(MultiThreadedEventLoopGroupProbe.loops).count
        // Two transfers hold slots: requests now alternate over the group's loops.
        let reservations = [try await hold(origin, in: engine), try await hold(origin, in: engine)]
        let chosen = (0..<(2 * loopCount)).map { _ in ObjectIdentifier(engine.eventLoop(for: Origin(url))) }
        #expect(Set(chosen).count == loopCount)
        for _ in reservations { engine.limiter.release(for: origin) }
        let alone = ObjectIdentifier(engine.eventLoop(for: Origin(url)))
        #expect(ObjectIdentifier(engine.eventLoop(for: Origin(url))) == alone)
    }

    @Test func onlyConcurrentRequestsToAnHTTP2OriginPinTheirConnection() async throws {
        let session = try session(connections: 4)
        defer { session.invalidateAndCancel() }
        let engine = session.engine
        let url = URL(string: "https://example.test/a")!
        let other = URL(string: "https://other.test/a")!
        #expect(!engine.pinsConnection(for: Origin(url)))
        engine.noteVersion(.http1_1, of: Origin(url))
        engine.noteVersion(.http2, of: Origin(other))
        let origin = Origin(url)
        let reservations = [try await hold(origin, in: engine), try await hold(origin, in: engine)]
        #expect(
            !engine.pinsConnection(for: Origin(url)),
            "HTTP/1.1 requests are never pinned (the pool would overflow)"
        )
        engine.noteVersion(.http2, of: Origin(URL(string: "https://EXAMPLE.test/b")!))
        #expect(
            engine.pinsConnection(for: Origin(url)),
            "concurrent requests to an HTTP/2 origin get a connection per loop"
        )
        for _ in reservations { engine.limiter.release(for: origin) }
        #expect(!engine.pinsConnection(for: Origin(url)), "a request alone keeps the origin's own loop, unpinned")
        #expect(!engine.pinsConnection(for: Origin(other)), "the other origin has no concurrent requests")
        let again = [try await hold(origin, in: engine), try await hold(origin, in: engine)]
        #expect(engine.pinsConnection(for: Origin(url)))
        engine.noteVersion(.http1_1, of: Origin(url))
        #expect(!engine.pinsConnection(for: Origin(url)), "an origin that answers over HTTP/1 again is not pinned")
        for _ in again { engine.limiter.release(for: origin) }
    }

    @Test func concurrentTransfersToAnOriginShareTheReadAhead() async throws {
        let session = try session(connections: 8)
        defer { session.invalidateAndCancel() }
        let engine = session.engine
        let url = URL(string: "http://example.test/a")!
        #expect(engine.readAhead(for: Origin(url)) == ResponseStream.readAhead)
        let origin = Origin(url)
        var reservations: [HostLimiter.Reservation] = []
        for count in 1...8 {
            reservations.append(try await hold(origin, in: engine))
            #expect(engine.readAhead(for: Origin(url)) == ResponseStream.readAhead / count)
        }
        #expect(engine.readAhead(for: Origin(URL(string: "http://other.test/")!)) == ResponseStream.readAhead)
        for _ in reservations { engine.limiter.release(for: origin) }
        #expect(engine.readAhead(for: Origin(url)) == ResponseStream.readAhead)
    }

    /// No tracer was bootstrapped in this process: AsyncHTTPClient gets none, so it starts no
    /// span per request.
    @Test func withoutABootstrappedTracerTheClientsTraceNothing() throws {
        let session = try session()
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://example.test/")!
        #expect(session.engine.client(for: url, decompressing: false).tracer == nil)
        #expect(session.engine.client(for: url, decompressing: true).tracer == nil)
    }
}

/// The loops of the group every engine uses.
enum MultiThreadedEventLoopGroupProbe {
    static var loops: [any EventLoop] { Array(NIOSingletons.posixEventLoopGroup.makeIterator()) }
}
