#if os(Linux)
import Glibc
import NIOCore

/// A listening Unix domain socket whose file is its owner's alone from the start.
///
/// Linux gives the file a socket's `bind(2)` creates the mode of the socket itself (less
/// the umask), so `fchmod(0600)` before `bind` is enough: no moment where another user
/// could connect, and no `umask(2)`, which is process-wide and would apply to every file
/// the process's other threads create meanwhile.
enum PrivateSocket {
    struct Failure: Error, CustomStringConvertible {
        var call: String
        var code: Int32
        var description: String { "\(call): \(String(cString: strerror(code)))" }
    }

    /// A socket listening at `path` (an existing file there is removed first).
    static func listen(at path: String) throws -> NIOBSDSocket.Handle {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw Failure(call: "bind \(path)", code: ENAMETOOLONG)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(call: "socket", code: errno) }
        do {
            guard fchmod(descriptor, 0o600) == 0 else { throw Failure(call: "fchmod", code: errno) }
            unlink(path)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0 else { throw Failure(call: "bind \(path)", code: errno) }
            guard Glibc.listen(descriptor, 128) == 0 else { throw Failure(call: "listen", code: errno) }
            let flags = fcntl(descriptor, F_GETFL)
            guard flags >= 0, fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
                throw Failure(call: "fcntl", code: errno)
            }
            return descriptor
        } catch {
            close(descriptor)
            throw error
        }
    }
}
#endif
