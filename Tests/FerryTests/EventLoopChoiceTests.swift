import Foundation
import NIOCore
import NIOHTTP1
import Testing

@testable import Ferry

@Suite("Engine.eventLoop(for:): one loop per origin, turns while several run")
struct EventLoopChoiceTests {
    @Test func anOriginsOnlyRequestAlwaysGetsItsOwnLoop() throws {
        let session = try Session(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://example.test:8080/a")!
        let first = session.engine.eventLoop(for: url)
        for path in ["/b", "/c?d", "/"] {
            let next = session.engine.eventLoop(for: URL(string: "http://EXAMPLE.test:8080\(path)")!)
            #expect(next === first, "sequential requests to one origin must share a loop (no hop)")
        }
    }

    @Test func concurrentRequestsToOneOriginTakeTurns() async throws {
        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 4
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let url = URL(string: "http://example.test/")!
        let origin = Origin(url)
        let limiter = session.engine.limiter
        let loopCount = Array(MultiThreadedEventLoopGroupProbe.loops).count
        // Two transfers hold slots: requests now alternate over the group's loops.
        let reservations = [
            limiter.reserve(for: origin, priority: 0.5), limiter.reserve(for: origin, priority: 0.5),
        ]
        for reservation in reservations { try await limiter.acquire(reservation) }
        let chosen = (0..<(2 * loopCount)).map { _ in ObjectIdentifier(session.engine.eventLoop(for: url)) }
        #expect(Set(chosen).count == loopCount)
        for _ in reservations { limiter.release(for: origin) }
        let alone = ObjectIdentifier(session.engine.eventLoop(for: url))
        #expect(ObjectIdentifier(session.engine.eventLoop(for: url)) == alone)
    }
}

extension EventLoopChoiceTests {
    @Test func onlyConcurrentRequestsToAnHTTP2OriginPinTheirConnection() async throws {
        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 4
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let engine = session.engine
        let url = URL(string: "https://example.test/a")!
        let other = URL(string: "https://other.test/a")!
        #expect(!engine.pinsConnection(for: url))
        engine.noteVersion(.http1_1, of: url)
        engine.noteVersion(.http2, of: other)
        let origin = Origin(url)
        let reservations = [
            engine.limiter.reserve(for: origin, priority: 0.5), engine.limiter.reserve(for: origin, priority: 0.5),
        ]
        for reservation in reservations { try await engine.limiter.acquire(reservation) }
        #expect(!engine.pinsConnection(for: url), "HTTP/1.1 requests are never pinned (the pool would overflow)")
        engine.noteVersion(.http2, of: URL(string: "https://EXAMPLE.test/b")!)
        #expect(engine.pinsConnection(for: url), "concurrent requests to an HTTP/2 origin get a connection per loop")
        for _ in reservations { engine.limiter.release(for: origin) }
        #expect(!engine.pinsConnection(for: url), "a request alone keeps the origin's own loop, unpinned")
        #expect(!engine.pinsConnection(for: other), "the other origin has no concurrent requests")
    }
}

extension EventLoopChoiceTests {
    @Test func concurrentTransfersToAnOriginShareTheReadAhead() async throws {
        var configuration = SessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 8
        let session = try Session(configuration: configuration)
        defer { session.invalidateAndCancel() }
        let engine = session.engine
        let url = URL(string: "http://example.test/a")!
        #expect(engine.readAhead(for: url) == ResponseStream.readAhead)
        let origin = Origin(url)
        var reservations: [HostLimiter.Reservation] = []
        for count in 1...8 {
            let reservation = engine.limiter.reserve(for: origin, priority: 0.5)
            try await engine.limiter.acquire(reservation)
            reservations.append(reservation)
            #expect(engine.readAhead(for: url) == ResponseStream.readAhead / count)
        }
        #expect(engine.readAhead(for: URL(string: "http://other.test/")!) == ResponseStream.readAhead)
        for _ in reservations { engine.limiter.release(for: origin) }
        #expect(engine.readAhead(for: url) == ResponseStream.readAhead)
    }
}

extension EventLoopChoiceTests {
    /// No tracer was bootstrapped in this process: AsyncHTTPClient gets none, so it starts no
    /// span per request.
    @Test func withoutABootstrappedTracerTheClientsTraceNothing() throws {
        let session = try Session(configuration: .ephemeral)
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
