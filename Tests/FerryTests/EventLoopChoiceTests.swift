import Foundation
import NIOCore
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

/// The loops of the group every engine uses.
enum MultiThreadedEventLoopGroupProbe {
    static var loops: [any EventLoop] { Array(NIOSingletons.posixEventLoopGroup.makeIterator()) }
}
