import Foundation

/// The web interface's address: parsing `--web HOST:PORT`, the loopback rule, the URL to
/// open, and the token. Values only; the server binds what these return.
package enum WebAddress {
    /// `host` and `port` from `HOST:PORT`, `[::1]:PORT` or a bare `PORT` (on 127.0.0.1);
    /// `nil` when it is none of these or the host is not a loopback address.
    package static func parse(_ text: String) -> (host: String, port: Int)? {
        var host = "127.0.0.1"
        var portText = Substring(text)
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return nil
            }
            host = String(text[text.index(after: text.startIndex)..<close])
            portText = text[text.index(close, offsetBy: 2)...]
        } else if let colon = text.lastIndex(of: ":") {
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
            // An IPv6 address goes in brackets: "::1:80" is ambiguous.
            if host.contains(":") { return nil }
        }
        guard let port = Int(portText), (0...65_535).contains(port), isLoopback(host) else { return nil }
        return (host, port)
    }

    /// Whether `host` is `localhost`, `::1` or an IPv4 address in 127.0.0.0/8: the only
    /// addresses the web interface listens on.
    package static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4,
            octets.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && UInt8($0) != nil })
        else { return false }
        return octets[0] == "127"
    }

    /// `http://host:port/` (IPv6 in brackets).
    package static func url(host: String, port: Int) -> String {
        host.contains(":") ? "http://[\(host)]:\(port)/" : "http://\(host):\(port)/"
    }

    /// A new random token: 32 bytes from the system's generator, base64url without padding.
    package static func makeToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
