import Testing

@testable import Ferry

/// A host is an address when the resolver would read it as one: then no server name goes in
/// the TLS handshake (RFC 6066 §3), the certificate is checked against its IP addresses, and
/// no cookie domain matches it by suffix (RFC 6265 §5.1.3).
@Suite("IP address literals")
struct IPAddressTests {
    @Test(arguments: [
        "127.0.0.1", "10.0.0.1", "255.255.255.255", "::1", "[::1]", "fe80::1%25eth0", "2001:db8::8:800:200c:417a",
        // Forms inet_aton(3) and so getaddrinfo(3) connect to as IPv4 addresses.
        "127.1", "0x7f.0.0.1", "2130706433",
    ])
    func addresses(host: String) {
        #expect(host.isIPAddress)
    }

    @Test(arguments: [
        "", "localhost", "example.com", "h.test", "1.2.3.4.example", "example.1", "256.1.1.1.nip", "a1.b2",
        "xn--bcher-kva.example",
    ])
    func names(host: String) {
        #expect(!host.isIPAddress)
    }
}
