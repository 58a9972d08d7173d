import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One socket of the kernel's TCP tables (`/proc/net/tcp` and `tcp6`), as much of it as the
/// tests ask about.
struct TCPTableSocket {
    /// The local port.
    var localPort: Int
    /// The remote port (0 for a listening socket).
    var remotePort: Int
    /// The kernel's TCP state, in hex as the table writes it: `01` established, `02` SYN sent,
    /// `0A` listening.
    var state: Substring
    /// Bytes written that the peer has not acknowledged (`tx_queue`).
    var sendQueue: Int
    /// The socket's inode: `socket:[INODE]` is what a process's `/proc/PID/fd` links name.
    var inode: Substring

    /// The kernel's state for a listening socket.
    static let listening: Substring = "0A"

    /// Every socket of `tables`, each read whole (``wholeTable(_:)``).
    static func all(in tables: [String] = ["/proc/net/tcp", "/proc/net/tcp6"]) -> [TCPTableSocket] {
        tables.flatMap { table in
            (wholeTable(table) ?? "").split(separator: "\n").dropFirst().compactMap(TCPTableSocket.init(line:))
        }
    }

    /// Parses one line of a table after its heading, or `nil` for one it cannot read.
    ///
    /// `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode`,
    /// addresses as `HEXADDRESS:HEXPORT`.
    init?(line: Substring) {
        let fields = line.split(separator: " ")
        guard fields.count > 9,
            let localPort = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
            let remotePort = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
            let sendQueue = fields[4].split(separator: ":").first.flatMap({ Int($0, radix: 16) })
        else { return nil }
        self.localPort = localPort
        self.remotePort = remotePort
        self.state = fields[3]
        self.sendQueue = sendQueue
        self.inode = fields[9]
    }

    /// The whole text of a `/proc/net` table, read into one buffer of 8 MiB.
    ///
    /// `String(contentsOfFile:)` cannot be used: the file's size is 0 by `stat`, and Foundation
    /// then makes one read of about 4 KiB, so every socket after the first 27 or so is missing
    /// (in a full test run, with hundreds of other tests' sockets listed before it, a server's
    /// listening socket was not seen for a minute). Nor a page at a time: the kernel's iterator
    /// then loses lines that move between reads, and sockets seen by the peer were missing from
    /// the table for seconds together.
    private static func wholeTable(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        let bytes = [UInt8](unsafeUninitializedCapacity: 8 << 20) { buffer, filled in
            filled = 0
            while filled < buffer.count {
                let count = read(descriptor, buffer.baseAddress! + filled, buffer.count - filled)
                if count <= 0 { break }
                filled += count
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
