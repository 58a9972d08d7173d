import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Tells a service manager how the daemon is doing, as `sd_notify(3)` does: one datagram of
/// `NAME=value` lines to the Unix socket named by `NOTIFY_SOCKET` (a path, or `@name` for
/// Linux's abstract namespace). systemd sets it for a unit of `Type=notify`, and then
/// considers the unit started only once `READY=1` arrives.
///
/// Without `NOTIFY_SOCKET` there is no notifier, and nothing is sent.
package struct SystemdNotifier: Sendable {
    /// The socket's address as `sockaddr_un.sun_path` holds it (a leading NUL for an
    /// abstract one).
    private let address: [UInt8]

    /// The notifier `NOTIFY_SOCKET` names, or `nil` when it names none (or a path too long
    /// for a Unix socket address).
    package init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let name = environment["NOTIFY_SOCKET"], name.count > 1 else { return nil }
        var bytes = Array(name.utf8)
        guard bytes.first == UInt8(ascii: "/") || bytes.first == UInt8(ascii: "@") else { return nil }
        if bytes[0] == UInt8(ascii: "@") { bytes[0] = 0 }
        guard bytes.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else { return nil }
        address = bytes
    }

    /// Sends `state` (`READY=1`, `STOPPING=1`, `STATUS=…`, lines joined by newlines); a
    /// manager that does not listen is no error of the daemon's.
    ///
    /// - Returns: whether the datagram was sent.
    @discardableResult
    package func notify(_ state: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { path in
            for (index, byte) in address.enumerated() { path[index] = byte }
        }
        // An abstract address is as long as its name; a path's ends at its NUL.
        let length = MemoryLayout.offset(of: \sockaddr_un.sun_path)! + address.count + (address.first == 0 ? 0 : 1)
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &socketAddress) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                message.withUnsafeBytes { bytes in
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), generic, socklen_t(length))
                }
            }
        }
        return sent == message.count
    }
}
