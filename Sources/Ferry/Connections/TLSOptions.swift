import Foundation
import NIOSSL
import X509

/// Whom a session trusts over `https`, and how it identifies itself: system roots or your
/// own, certificates pinned per host (AFSecurityPolicy's certificate mode), a client
/// certificate. Certificate validation is always on unless ``allowsInvalidCertificates`` is
/// set.
///
/// ```swift
/// configuration.tls.trustRoots = .custom(pem: companyRootPEM)           // --cacert
/// configuration.tls.pinnedCertificates["api.example.com"] = issuingCAPEM  // --pin FILE
/// configuration.tls.pinnedPublicKeys["api.example.com"] = ["d6qzRu9zOECb90Uez27xWltNsj0e1Md7GkYYkVoZWmM="]
/// configuration.tls.clientIdentity = .init(certificateChainPEM: chain, privateKeyPEM: key)
/// ```
///
/// A pinned host trusts only the pinned certificates as anchors: its chain must lead to one
/// of them (a CA of the chain, or a self-signed server certificate), whatever the roots say;
/// any other chain ends the connection with ``FerryError/Reason/secureConnectionFailed``.
///
/// A host with ``pinnedPublicKeys`` (AFSecurityPolicy's public-key mode), and every host when
/// ``delegateEvaluatesServerTrust`` is on, is verified by Ferry itself: the chain is
/// validated against the roots (RFC 5280, the host name or address), then one of its
/// certificates must carry a pinned key, then the delegate may overrule the verdict. Those
/// connections cost one more hop inside the process (AsyncHTTPClient offers no verification
/// hook; see `TLSBridge`).
public struct TLSOptions: Sendable, Equatable {
    /// The certificates a server's chain may lead to.
    public enum TrustRoots: Sendable, Equatable {
        /// The system's trust store.
        case system
        /// Only these certificates (PEM, one or more).
        case custom(pem: String)
        /// The system's, and these too.
        case systemAnd(pem: String)
    }

    /// A certificate chain and its private key, in PEM, presented when a server asks.
    public struct ClientIdentity: Sendable, Equatable {
        /// The client's certificate, then any intermediates, in PEM.
        public var certificateChainPEM: String
        /// The certificate's private key, in PEM.
        public var privateKeyPEM: String

        /// A client identity from a PEM certificate chain and its key.
        public init(certificateChainPEM: String, privateKeyPEM: String) {
            self.certificateChainPEM = certificateChainPEM
            self.privateKeyPEM = privateKeyPEM
        }
    }

    /// The certificates a server's chain must lead to: the system's (default) or your own.
    public var trustRoots: TrustRoots = .system
    /// Per host (lowercased name or address), the certificates (PEM) its chain must lead to.
    public var pinnedCertificates: [String: String] = [:]
    /// Per host (lowercased name or address), the public keys one certificate of its chain
    /// must carry: Base64 SHA-256 of the DER SubjectPublicKeyInfo, with or without curl's
    /// `sha256//` prefix (`openssl x509 -pubkey -noout | openssl pkey -pubin -outform der |
    /// openssl dgst -sha256 -binary | base64`). The chain must also be valid.
    public var pinnedPublicKeys: [String: Set<String>] = [:]
    /// Ask ``SessionDelegate/session(_:didReceive:)-(_,ServerTrustChallenge)`` about every
    /// new https connection (URLSession's server-trust challenge). Off: nobody is asked.
    public var delegateEvaluatesServerTrust = false
    /// The certificate to present when a server asks for one; `nil` for none.
    public var clientIdentity: ClientIdentity?
    /// Accept any certificate (curl's `--insecure`). Off, and meant to stay off.
    public var allowsInvalidCertificates = false
    /// Offer HTTP/2 when a connection is secured (ALPN's `h2`, then `http/1.1`), so a server
    /// that speaks it multiplexes the session's requests over one connection. On by default,
    /// as curl and URLSession do.
    ///
    /// Requests without a body that are not decoded go over connections Ferry keeps itself,
    /// several to one origin when its server allows fewer streams at once
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`) than the requests waiting, within
    /// ``SessionConfiguration/httpMaximumConnectionsPerHost``; the others over
    /// AsyncHTTPClient's. An origin that answers ALPN with `http/1.1` costs one handshake
    /// more, once per session.
    ///
    /// Off, every `https` connection speaks HTTP/1.1 (curl's `--http1.1`): to compare, or to
    /// get past a server whose HTTP/2 is broken. Plain `http` is HTTP/1.1 either way: Ferry
    /// does not speak HTTP/2 without TLS (`h2c`). Connections Ferry verifies itself (public-key
    /// pins, ``delegateEvaluatesServerTrust``) and stream tasks speak HTTP/1.1 too.
    ///
    /// ```swift
    /// configuration.tls.offersHTTP2 = false  // --http1.1
    /// ```
    public var offersHTTP2 = true

    /// The defaults: the system's roots, no pinning, no client certificate.
    public init() {}

    /// The configurations for the engine, checked: invalid PEM is an error now, not at the
    /// first connection.
    ///
    /// - Parameters:
    ///   - measuringConnections: every request goes through the bridge (see
    ///     ``SessionConfiguration/collectsConnectionMetrics``).
    ///   - bridgingProxy: requests through an HTTP proxy go through the bridge (it answers
    ///     the proxy's challenges).
    func resolved(measuringConnections: Bool = false, bridgingProxy: Bool = false) throws(FerryError) -> ResolvedTLS {
        do {
            var base = TLSConfiguration.makeClientConfiguration()
            switch trustRoots {
            case .system:
                break
            case .custom(let pem):
                base.trustRoots = .certificates(try Self.certificates(pem))
            case .systemAnd(let pem):
                base.additionalTrustRoots = [.certificates(try Self.certificates(pem))]
            }
            if let clientIdentity {
                base.certificateChain = try Self.certificates(clientIdentity.certificateChainPEM).map {
                    .certificate($0)
                }
                base.privateKey = .privateKey(
                    try NIOSSLPrivateKey(bytes: Array(clientIdentity.privateKeyPEM.utf8), format: .pem)
                )
            }
            if allowsInvalidCertificates { base.certificateVerification = .none }
            var pinned: [String: TLSConfiguration] = [:]
            for (host, pem) in pinnedCertificates {
                var configuration = base
                configuration.trustRoots = .certificates(try Self.certificates(pem))
                configuration.additionalTrustRoots = []
                configuration.certificateVerification = .fullVerification
                pinned[host.lowercased()] = configuration
            }
            return ResolvedTLS(
                base: self == TLSOptions() ? nil : base,
                pinned: pinned,
                evaluator: try evaluator(
                    base: base,
                    measuringConnections: measuringConnections,
                    bridgingProxy: bridgingProxy
                )
            )
        } catch let error as FerryError {
            throw error
        } catch {
            throw FerryError(
                .unsupportedConfiguration,
                "The TLS options hold a certificate or key that is not valid PEM.",
                underlying: error
            )
        }
    }

    /// The evaluator of the hosts Ferry verifies itself, if any.
    private func evaluator(
        base: TLSConfiguration,
        measuringConnections: Bool,
        bridgingProxy: Bool
    ) throws -> TrustEvaluator? {
        guard delegateEvaluatesServerTrust || !pinnedPublicKeys.isEmpty || measuringConnections || bridgingProxy
        else { return nil }
        func parsed(_ pem: String) throws -> [Certificate] {
            try Self.certificates(pem).map { try Certificate(derEncoded: try $0.toDERBytes()) }
        }
        let roots: TrustEvaluator.Roots
        switch trustRoots {
        case .system: roots = .system
        case .custom(let pem): roots = .custom(try parsed(pem))
        case .systemAnd(let pem): roots = .systemAnd(try parsed(pem))
        }
        var keys: [String: Set<String>] = [:]
        for (host, pins) in pinnedPublicKeys {
            keys[host.lowercased()] = Set(
                try pins.map { pin throws(FerryError) in
                    let digest = pin.hasPrefix("sha256//") ? String(pin.dropFirst(8)) : pin
                    guard let bytes = Data(base64Encoded: digest), bytes.count == 32 else {
                        throw FerryError(
                            .unsupportedConfiguration,
                            "'\(pin)' is not a public-key pin (Base64 of a SHA-256 digest, optionally after sha256//)."
                        )
                    }
                    return bytes.base64EncodedString()
                }
            )
        }
        var connection = base
        connection.certificateVerification = .fullVerification
        return TrustEvaluator(
            roots: roots,
            pinnedCertificates: try pinnedCertificates.reduce(into: [:]) {
                $0[$1.key.lowercased()] = try parsed($1.value)
            },
            pinnedKeys: keys,
            allowsInvalidCertificates: allowsInvalidCertificates,
            asksDelegate: delegateEvaluatesServerTrust,
            bridgesEverything: measuringConnections,
            connection: connection
        )
    }

    private static func certificates(_ pem: String) throws -> [NIOSSLCertificate] {
        let certificates = try NIOSSLCertificate.fromPEMBytes(Array(pem.utf8))
        guard !certificates.isEmpty else {
            throw FerryError(.unsupportedConfiguration, "A TLS option names no certificate (expected PEM).")
        }
        return certificates
    }
}

/// ``TLSOptions`` turned into NIOSSL configurations once per session.
struct ResolvedTLS: Sendable {
    /// For every connection; `nil` keeps AsyncHTTPClient's default (system roots).
    let base: TLSConfiguration?
    /// Per pinned host.
    let pinned: [String: TLSConfiguration]
    /// For the hosts Ferry verifies itself (public-key pins, the delegate), if any.
    let evaluator: TrustEvaluator?

    init(base: TLSConfiguration?, pinned: [String: TLSConfiguration], evaluator: TrustEvaluator? = nil) {
        self.base = base
        self.pinned = pinned
        self.evaluator = evaluator
    }

    /// What a connection Ferry makes itself to `host` verifies TLS with (a stream task's,
    /// an upgrade's): the host's certificate pin, else the session's roots and identity,
    /// else the system's defaults.
    func configuration(forHost host: String) -> TLSConfiguration {
        pinned[host.lowercased()] ?? base ?? .makeClientConfiguration()
    }

    /// The configuration a request to `url` must use when it differs from the client's.
    func override(for url: URL) -> TLSConfiguration? {
        guard url.scheme?.lowercased() == "https", let host = url.host?.lowercased() else { return nil }
        return pinned[host]
    }
}
