import Foundation
import NIOCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client's side of a SOCKS5 handshake (RFC 1928) with username / password
/// authentication (RFC 1929), as a value: bytes in, bytes to send and a verdict out.
///
/// No I/O happens here: ``SOCKS5Handler`` writes what ``start()`` and ``received(_:)``
/// return and reads what the proxy sends. The order is fixed by the RFCs: the greeting
/// offers "no authentication" and, with a credential, "username/password"; the proxy picks
/// one; a credential is sent if it picked that; then `CONNECT` to the target (an IPv4 or
/// IPv6 literal as an address, anything else as a domain name the proxy resolves); the
/// proxy's reply opens the tunnel or says why not.
struct SOCKS5Handshake: Sendable {
    enum Phase: Sendable, Equatable {
        case idle, greeting, authenticating, connecting, established, failed
    }

    enum Action: Sendable, Equatable {
        /// Write these bytes to the proxy.
        case send(ByteBuffer)
        /// Wait for more bytes from the proxy.
        case needMore
        /// The tunnel is open; `leftover` bytes already belong to the target's stream.
        case established(leftover: ByteBuffer)
        /// The handshake failed; close the connection.
        case fail(FerryError)
    }

    let host: String
    let port: Int
    let credential: Credential?
    private(set) var phase = Phase.idle

    init(host: String, port: Int, credential: Credential?) {
        self.host = host
        self.port = port
        self.credential = credential
    }

    /// The greeting: the methods offered.
    mutating func start() -> Action {
        guard phase == .idle else { return .fail(Self.error("The SOCKS5 handshake was started twice.")) }
        if let credential, credential.user.utf8.count > 255 || credential.password.utf8.count > 255 {
            phase = .failed
            return .fail(Self.error("A SOCKS5 user name or password is at most 255 bytes (RFC 1929)."))
        }
        guard !host.isEmpty, host.utf8.count <= 255, (1...65535).contains(port) else {
            phase = .failed
            return .fail(Self.error("'\(host)' port \(port) cannot be named to a SOCKS5 proxy."))
        }
        phase = .greeting
        let methods: [UInt8] = credential == nil ? [0x00] : [0x00, 0x02]
        return .send(ByteBuffer(bytes: [0x05, UInt8(methods.count)] + methods))
    }

    /// Bytes from the proxy (consumed from `buffer` as far as they make a whole reply).
    mutating func received(_ buffer: inout ByteBuffer) -> Action {
        switch phase {
        case .idle, .established, .failed:
            return .fail(Self.error("The SOCKS5 proxy sent bytes out of turn."))
        case .greeting:
            guard let reply = buffer.readBytes(length: 2) else { return .needMore }
            guard reply[0] == 0x05 else { return fail("The proxy does not speak SOCKS5 (version \(reply[0])).") }
            switch reply[1] {
            case 0x00:
                return connect()
            case 0x02:
                guard let credential else {
                    return fail("The SOCKS5 proxy asked for a user name and password; none was given.")
                }
                phase = .authenticating
                let user = Array(credential.user.utf8)
                let password = Array(credential.password.utf8)
                return .send(
                    ByteBuffer(bytes: [0x01, UInt8(user.count)] + user + [UInt8(password.count)] + password)
                )
            case 0xFF:
                return fail(
                    credential == nil
                        ? "The SOCKS5 proxy requires authentication; give it a user name and password."
                        : "The SOCKS5 proxy accepts none of the offered methods (none, username/password)."
                )
            default:
                return fail("The SOCKS5 proxy chose a method that was not offered (\(reply[1])).")
            }
        case .authenticating:
            guard let reply = buffer.readBytes(length: 2) else { return .needMore }
            guard reply[0] == 0x01, reply[1] == 0x00 else {
                return fail("The SOCKS5 proxy refused the user name and password (RFC 1929 status \(reply[1])).")
            }
            return connect()
        case .connecting:
            return readConnectReply(&buffer)
        }
    }

    private mutating func connect() -> Action {
        phase = .connecting
        var request: [UInt8] = [0x05, 0x01, 0x00]
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            request.append(0x01)
            request += withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            request.append(0x04)
            request += withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            let name = Array(host.utf8)
            request += [0x03, UInt8(name.count)] + name
        }
        request += [UInt8(port >> 8), UInt8(port & 0xFF)]
        return .send(ByteBuffer(bytes: request))
    }

    private mutating func readConnectReply(_ buffer: inout ByteBuffer) -> Action {
        // VER REP RSV ATYP, then the bound address and port.
        guard buffer.readableBytes >= 5, let head = buffer.getBytes(at: buffer.readerIndex, length: 5) else {
            return .needMore
        }
        guard head[0] == 0x05 else { return fail("The proxy's reply is not SOCKS5 (version \(head[0])).") }
        let addressLength: Int
        switch head[3] {
        case 0x01: addressLength = 4
        case 0x04: addressLength = 16
        case 0x03: addressLength = 1 + Int(head[4])
        default: return fail("The SOCKS5 proxy's reply has an unknown address type (\(head[3])).")
        }
        let total = 4 + addressLength + 2
        guard buffer.readableBytes >= total else { return .needMore }
        buffer.moveReaderIndex(forwardBy: total)
        guard head[1] == 0x00 else {
            return fail("The SOCKS5 proxy could not connect to \(host):\(port): \(Self.meaning(ofReply: head[1])).")
        }
        phase = .established
        let leftover = buffer.readSlice(length: buffer.readableBytes) ?? ByteBuffer()
        return .established(leftover: leftover)
    }

    private mutating func fail(_ message: String) -> Action {
        phase = .failed
        return .fail(Self.error(message))
    }

    private static func error(_ message: String) -> FerryError { FerryError(.network, message) }

    /// RFC 1928 §6's reply field, in words.
    static func meaning(ofReply code: UInt8) -> String {
        switch code {
        case 0x01: "general failure"
        case 0x02: "not allowed by its rules"
        case 0x03: "network unreachable"
        case 0x04: "host unreachable"
        case 0x05: "connection refused"
        case 0x06: "TTL expired"
        case 0x07: "command not supported"
        case 0x08: "address type not supported"
        default: "reply \(code)"
        }
    }
}
