import ArgumentParser
import Ferry
import Foundation

/// How every `ferry` command reaches the server: credentials, proxy, cookie file.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: [.customShort("u"), .customLong("user")],
        help: "Credentials, 'user:password': answer the server's Digest or Basic challenge (never sent unasked)."
    )
    var user: String?

    @Option(
        name: [.customShort("x"), .customLong("proxy")],
        help: "Proxy, '[http://|socks5://][user:password@]host[:port]' (default: http_proxy, https_proxy, all_proxy)."
    )
    var proxy: String?

    @Option(name: .customLong("noproxy"), help: "Hosts to reach directly, comma-separated (default: no_proxy).")
    var noProxy: String?

    @Option(
        name: [.customShort("b"), .customLong("cookies")],
        help: "Cookie file (JSON, created if missing): cookies in it are sent, cookies received are saved to it."
    )
    var cookieFile: String?

    @Option(
        name: .customLong("cookie-jar"),
        help: "Write the cookies kept at the end (those with an expiry, -b's included) to this file (curl's -c)."
    )
    var cookieJar: String?

    @Option(name: .customLong("cacert"), help: "Trust the certificates in this PEM file instead of the system's.")
    var caCertificates: String?

    @Option(
        name: .customLong("pin"),
        help: ArgumentHelp(
            "Pin the URL's host: a PEM file (its chain must lead to one of the certificates) or public keys, 'sha256//BASE64[;sha256//BASE64…]' (one certificate of the valid chain must carry one).",
            valueName: "file|sha256//key"
        )
    )
    var pin: String?

    @Flag(name: [.customShort("k"), .customLong("insecure")], help: "Accept any server certificate (unsafe).")
    var insecure = false

    func validate() throws {
        if let proxy, Proxy(address: proxy) == nil { throw ValidationError("'\(proxy)' is not a proxy address.") }
    }

    /// Puts these options into `configuration` for a request to `url`.
    func apply(to configuration: inout SessionConfiguration, for url: URL) throws {
        configuration.credential = CommandRequest.credential(from: user)
        // -x and --noproxy win over the environment's variables, read by curl's rules.
        var variables = ProcessInfo.processInfo.environment
        if let proxy {
            for name in ["https_proxy", "http_proxy", "all_proxy"] { variables[name] = proxy }
        }
        if let noProxy { variables["no_proxy"] = noProxy }
        configuration.proxy = Proxy.fromEnvironment(variables, for: url)
        if let caCertificates { configuration.tls.trustRoots = .custom(pem: try Self.read(caCertificates)) }
        if let pin, let host = url.host?.lowercased() {
            if pin.hasPrefix("sha256//") {
                configuration.tls.pinnedPublicKeys[host] = Set(pin.split(separator: ";").map(String.init))
            } else {
                configuration.tls.pinnedCertificates[host] = try Self.read(pin)
            }
        }
        configuration.tls.allowsInvalidCertificates = insecure
        // Without a cookie file, a command keeps cookies for its own redirects only.
        let read = try cookieFile.map { try CookieStore(persistingTo: URL(fileURLWithPath: $0)) }
        if let cookieJar {
            // The jar starts from -b's cookies, not from what it held before (as curl's -c).
            let jar = try CookieStore(persistingTo: URL(fileURLWithPath: cookieJar))
            jar.removeAll()
            for cookie in read?.allCookies ?? [] { jar.set(cookie) }
            configuration.cookieStore = jar
        } else {
            configuration.cookieStore = read ?? CookieStore()
        }
    }

    private static func read(_ path: String) throws -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw FerryError(.fileSystem, "Cannot read '\(path)'.", underlying: error)
        }
    }
}
