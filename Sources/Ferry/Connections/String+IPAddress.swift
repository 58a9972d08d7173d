#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension String {
    /// Whether this host is an IP address rather than a name, read as the resolver reads
    /// it: an IPv6 literal (with or without its brackets), or IPv4 in any form
    /// `inet_aton(3)` takes, which is what `getaddrinfo(3)` connects to (`127.0.0.1`, and
    /// also `127.1`, `0x7f.0.0.1`, `2130706433`).
    ///
    /// What depends on it: no server name is sent for an address (RFC 6066 §3 allows none);
    /// a certificate is checked against its IP addresses instead of its names; a cookie's
    /// domain never matches an address by suffix (RFC 6265 §5.1.3).
    var isIPAddress: Bool {
        if utf8.contains(UInt8(ascii: ":")) { return true }
        var address = in_addr()
        return inet_aton(self, &address) != 0
    }
}
