import ArgumentParser
import Ferry
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How every `ferry` command reaches the server: credentials, proxy, cookies, TLS, the
/// HTTP version.
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: [.customShort("u"), .customLong("user")],
        help:
            "Credentials, 'user:password': sent as Basic at once, to the URL's origin only (curl's default); with --digest or --anyauth they answer the server's challenge instead."
    )
    var user: String?

    @Flag(name: .customLong("basic"), help: "Send -u's credentials as Basic at once (the default).")
    var basic = false

    @Flag(name: .customLong("digest"), help: "Use -u's credentials only to answer a Digest challenge.")
    var digest = false

    @Flag(
        name: .customLong("anyauth"),
        help: "Use -u's credentials only to answer the server's challenge, Digest or Basic."
    )
    var anyAuth = false

    @Flag(
        name: [.customShort("n"), .customLong("netrc")],
        help: "Read the URL host's credentials from ~/.netrc (when -u gives none)."
    )
    var netrc = false

    @Flag(name: .customLong("netrc-optional"), help: "Like -n, and no error when the file is missing.")
    var netrcOptional = false

    @Option(
        name: .customLong("netrc-file"),
        help: "Read the credentials from this netrc file instead of ~/.netrc (it must not be readable by others)."
    )
    var netrcFile: String?

    @Option(
        name: [.customShort("x"), .customLong("proxy")],
        help: "Proxy, '[http://|socks5://][user:password@]host[:port]' (default: http_proxy, https_proxy, all_proxy)."
    )
    var proxy: String?

    @Option(name: .customLong("noproxy"), help: "Hosts to reach directly, comma-separated (default: no_proxy).")
    var noProxy: String?

    @Flag(
        name: [.customShort("v"), .customLong("verbose")],
        help:
            "Print each request and response head ('> ', '< ') and what Ferry decides ('* ') on standard error, as curl -v; credentials redacted."
    )
    var verbose = false

    @Option(
        name: [.customShort("b"), .customLong("cookie"), .customLong("cookies")],
        help: ArgumentHelp(
            "Cookies to send: 'name=value; name2=value2' (to the URL's host only), or a cookie file to read (Netscape cookies.txt, as curl and browsers write it).",
            valueName: "data|file"
        )
    )
    var cookie: String?

    @Option(
        name: .customLong("cookie-jar"),
        help:
            "Write every cookie kept at the end, session cookies and -b's included, to this file in Netscape format (curl's -c), mode 0600."
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

    @Flag(
        exclusivity: .chooseLast,
        help:
            "The HTTP version over https: --http2 offers HTTP/2, then HTTP/1.1 (the default); --http1.1 speaks HTTP/1.1 only."
    )
    var httpVersion: HTTPVersionFlag = .http2

    @Option(
        name: .customLong("limit-rate"),
        help: "Move at most RATE bytes per second (curl's --limit-rate: suffixes k, M, G)."
    )
    var limitRate: String?

    func validate() throws {
        if let proxy, Proxy(address: proxy) == nil { throw ValidationError("'\(proxy)' is not a proxy address.") }
        if [basic, digest, anyAuth].filter({ $0 }).count > 1 {
            throw ValidationError("Choose one of --basic, --digest and --anyauth.")
        }
        if let limitRate, (Int64(byteCount: limitRate) ?? 0) < 1 {
            throw ValidationError("--limit-rate takes bytes per second, with k, M or G if you like (500k).")
        }
    }

    /// Puts these options into `configuration` and `request` for a request to `url`.
    /// - Parameters:
    ///   - cookies: The command's cookie store, when several transfers share one (-b's
    ///     cookies for `url`'s host are added to it); `nil`: a new one.
    ///   - inputs: What the options read from the environment and from files, read once
    ///     for a command's many transfers (``inputs()``); `nil`: read now.
    func apply(
        to configuration: inout SessionConfiguration,
        for url: URL,
        request: inout URLRequest,
        cookies shared: CookieStore? = nil,
        inputs given: Inputs? = nil
    ) throws {
        let inputs = given ?? self.inputs()
        if verbose { configuration.logger = VerboseLog.logger() }
        configuration.maximumBytesPerSecond = limitRate.flatMap(Int64.init(byteCount:))
        if let credential = try credential(for: url, inputs: inputs) {
            if digest || anyAuth {
                configuration.credential = credential
            } else if request.value(forHTTPHeaderField: "Authorization") == nil {
                // As curl: Basic at once. A header of the request's own, so it goes to this
                // origin only: a redirect elsewhere drops it.
                request.setValue(
                    BasicAuthentication.headerValue(username: credential.user, password: credential.password),
                    forHTTPHeaderField: "Authorization"
                )
            }
        }
        // -x and --noproxy win over the environment's variables, read by curl's rules.
        configuration.proxy = Proxy.fromEnvironment(inputs.proxyVariables, for: url)
        if let trustRoots = inputs.trustRoots { configuration.tls.trustRoots = .custom(pem: try trustRoots.get()) }
        if let pin, let host = url.host?.lowercased() {
            if pin.hasPrefix("sha256//") {
                configuration.tls.pinnedPublicKeys[host] = Set(pin.split(separator: ";").map(String.init))
            } else {
                configuration.tls.pinnedCertificates[host] = try Self.read(pin)
            }
        }
        configuration.tls.allowsInvalidCertificates = insecure
        configuration.tls.offersHTTP2 = httpVersion == .http2
        // A command's cookies live in memory: -b's, then what the responses set (for its own
        // redirects); --cookie-jar writes them out at the end (`saveCookieJar`).
        let cookies = shared ?? CookieStore()
        if let cookie { try Self.addCookies(cookie, for: url, to: cookies) }
        configuration.cookieStore = cookies
        if let cookieJar { try Self.checkJar(URL(fileURLWithPath: cookieJar)) }
    }

    /// Refuses a jar that would overwrite a file of another kind (curl overwrites anything;
    /// a mistyped name should not cost the user a file).
    private static func checkJar(_ jar: URL) throws {
        guard FileManager.default.fileExists(atPath: jar.path) else { return }
        if let text = try? String(contentsOf: jar, encoding: .utf8),
            text.allSatisfy(\.isWhitespace) || (try? NetscapeCookieFile.cookies(in: text)) != nil
                || (try? CookieStore(persistingTo: jar)) != nil
        {
            return
        }
        throw FerryError(
            .fileSystem,
            "'\(jar.path)' exists and is not a cookie file: --cookie-jar does not overwrite it."
        )
    }

    /// Writes the cookie jar, if --cookie-jar names one: every cookie kept, session cookies
    /// included, in Netscape format.
    func saveCookieJar(_ configuration: SessionConfiguration) {
        guard let cookieJar, let store = configuration.cookieStore else { return }
        do {
            try store.exportNetscapeCookies(to: URL(fileURLWithPath: cookieJar))
        } catch {
            // As curl: the transfer's outcome stands; the jar's failure is said.
            FileHandle.standardError.write(Data("ferry: warning: \(error.description)\n".utf8))
        }
    }

    /// -b's argument: inline cookies (`a=b; c=d`, curl's rule: it has a `=`) for the URL's
    /// host, else a cookie file: Netscape format, or a JSON store of earlier Ferry versions.
    private static func addCookies(_ argument: String, for url: URL, to store: CookieStore) throws {
        if argument.contains("=") {
            guard let host = url.host?.lowercased() else { return }
            for pair in argument.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let name = parts[0].trimmingCharacters(in: .whitespaces)
                guard !name.isEmpty else { continue }
                let value = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
                // Host-only: these cookies were given for this URL, and a redirect to another
                // host does not get them.
                store.set(Cookie(name: name, value: value, domain: host, hostOnly: true, path: "/"))
            }
            return
        }
        let file = URL(fileURLWithPath: argument)
        // curl reads a missing cookie file as an empty one.
        guard FileManager.default.fileExists(atPath: file.path) else { return }
        do {
            try store.importNetscapeCookies(from: file)
        } catch let netscape {
            // Ferry's JSON store, as earlier versions wrote it.
            guard let legacy = try? CookieStore(persistingTo: file) else { throw netscape }
            for cookie in legacy.allCookies { store.set(cookie) }
        }
    }

    static func read(_ path: String) throws(FerryError) -> String {
        do {
            return try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw FerryError(.fileSystem, "Cannot read '\(path)'.", underlying: error)
        }
    }
}

/// curl's `--http1.1` and `--http2`; the last one given wins, as in curl.
enum HTTPVersionFlag: String, EnumerableFlag {
    case http1_1
    case http2

    static func name(for value: Self) -> NameSpecification {
        switch value {
        case .http1_1: .customLong("http1.1")
        case .http2: .customLong("http2")
        }
    }
}
