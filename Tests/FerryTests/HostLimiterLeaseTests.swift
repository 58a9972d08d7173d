import Foundation
import Testing

@testable import Ferry

/// A transfer's leases on a real `HostLimiter`: the slot of each connection is held while
/// its work runs and given back however the work ends.
@Suite("HostLimiter.Lease")
struct HostLimiterLeaseTests {
    let origin = Origin(URL(string: "http://h.test/f")!)

    func lease(_ limiter: HostLimiter) -> HostLimiter.Lease {
        HostLimiter.Lease(limiter, reservation: nil, priority: 0.5) { _ in }
    }

    @Test func connectionZeroIsTheTransfersOwnSlot() async throws {
        let limiter = HostLimiter(limit: 4)
        let own = lease(limiter)
        try await own.hold(origin)
        let same = await own.forConnection(0) { $0 === own }
        #expect(same)
        // Still held afterwards: the transfer gives its own slot back itself.
        #expect(limiter.running(for: origin) == 1)
        own.release()
        #expect(limiter.running(for: origin) == 0)
    }

    @Test func aFurtherConnectionHoldsItsOwnSlotUntilItsWorkEnds() async throws {
        let limiter = HostLimiter(limit: 4)
        let own = lease(limiter)
        try await own.hold(origin)
        let during = try await own.forConnection(2) { extra -> Int in
            #expect(extra !== own)
            #expect(extra.connection == 2)
            try await extra.hold(origin)
            return limiter.running(for: origin)
        }
        #expect(during == 2)
        #expect(limiter.running(for: origin) == 1, "the further connection's slot was given back")
        struct Failed: Error {}
        await #expect(throws: Failed.self) {
            try await own.forConnection(1) { extra in
                try await extra.hold(origin)
                throw Failed()
            }
        }
        #expect(limiter.running(for: origin) == 1, "given back when the work throws too")
        own.release()
    }
}
