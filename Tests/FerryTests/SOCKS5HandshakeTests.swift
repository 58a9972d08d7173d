import NIOCore
import Testing

@testable import Ferry

@Suite("SOCKS5Handshake: RFC 1928 and RFC 1929 as a value")
struct SOCKS5HandshakeTests {
    private func bytes(_ action: SOCKS5Handshake.Action) -> [UInt8]? {
        guard case .send(let buffer) = action else { return nil }
        return Array(buffer.readableBytesView)
    }

    private func feed(_ handshake: inout SOCKS5Handshake, _ bytes: [UInt8]) -> SOCKS5Handshake.Action {
        var buffer = ByteBuffer(bytes: bytes)
        return handshake.received(&buffer)
    }

    @Test func withACredentialItOffersBothMethodsAndAnswersTheProxysChoice() {
        var handshake = SOCKS5Handshake(
            host: "example.org",
            port: 443,
            credential: Credential(user: "ada", password: "pw")
        )
        #expect(bytes(handshake.start()) == [0x05, 0x02, 0x00, 0x02])
        #expect(bytes(feed(&handshake, [0x05, 0x02])) == [0x01, 3] + Array("ada".utf8) + [2] + Array("pw".utf8))
        #expect(handshake.phase == .authenticating)
        let connect = bytes(feed(&handshake, [0x01, 0x00]))
        #expect(connect == [0x05, 0x01, 0x00, 0x03, 11] + Array("example.org".utf8) + [0x01, 0xBB])
        // The reply, in two pieces, with the first bytes of the tunnel behind it.
        #expect(feed(&handshake, [0x05, 0x00, 0x00]) == .needMore)
        var rest = ByteBuffer(bytes: [0x01, 127, 0, 0, 1, 0x04, 0x38, 0xAB])
        var all = ByteBuffer(bytes: [0x05, 0x00, 0x00])
        all.writeBuffer(&rest)
        var fresh = SOCKS5Handshake(host: "example.org", port: 443, credential: nil)
        _ = fresh.start()
        _ = feed(&fresh, [0x05, 0x00])
        #expect(fresh.received(&all) == .established(leftover: ByteBuffer(bytes: [0xAB])))
        #expect(fresh.phase == .established)
    }

    @Test func addressesAreSentAsAddressesAndNamesAsNames() {
        for (host, expected) in [
            ("127.0.0.1", [0x01, 127, 0, 0, 1] as [UInt8]),
            ("::1", [0x04] + [UInt8](repeating: 0, count: 15) + [1]),
            ("localhost", [0x03, 9] + Array("localhost".utf8)),
        ] {
            var handshake = SOCKS5Handshake(host: host, port: 80, credential: nil)
            _ = handshake.start()
            #expect(bytes(feed(&handshake, [0x05, 0x00])) == [0x05, 0x01, 0x00] + expected + [0x00, 80])
        }
    }

    @Test func refusalsSayWhy() {
        func failure(_ action: SOCKS5Handshake.Action) -> String? {
            if case .fail(let error) = action { return error.message }
            return nil
        }
        var noCredential = SOCKS5Handshake(host: "h", port: 1, credential: nil)
        _ = noCredential.start()
        #expect(failure(feed(&noCredential, [0x05, 0xFF]))?.contains("requires authentication") == true)

        var refused = SOCKS5Handshake(host: "h", port: 1, credential: Credential(user: "a", password: "wrong"))
        _ = refused.start()
        _ = feed(&refused, [0x05, 0x02])
        #expect(failure(feed(&refused, [0x01, 0x01]))?.contains("refused the user name and password") == true)
        #expect(refused.phase == .failed)

        var unreachable = SOCKS5Handshake(host: "h", port: 1, credential: nil)
        _ = unreachable.start()
        _ = feed(&unreachable, [0x05, 0x00])
        #expect(
            failure(feed(&unreachable, [0x05, 0x05, 0x00, 0x01, 0, 0, 0, 0, 0, 0]))?.contains("connection refused")
                == true
        )

        var notSOCKS = SOCKS5Handshake(host: "h", port: 1, credential: nil)
        _ = notSOCKS.start()
        #expect(failure(feed(&notSOCKS, [0x48, 0x54])) != nil, "an HTTP server's answer is no SOCKS5")

        var tooLong = SOCKS5Handshake(
            host: "h",
            port: 1,
            credential: Credential(user: String(repeating: "u", count: 256), password: "")
        )
        #expect(failure(tooLong.start())?.contains("255") == true)
    }
}
