import Foundation
import NIOSSL

/// Whom a session trusts over `https`, and how it identifies itself: system roots or your
/// own, certificates pinned per host (AFSecurityPolicy's certificate mode), a client
/// certificate. Certificate validation is always on unless ``allowsInvalidCertificates`` is
/// set.
///
/// ```swift
/// configuration.tls.trustRoots = .custom(pem: companyRootPEM)           // --cacert
/// configuration.tls.pinnedCertificates["api.example.com"] = issuingCAPEM  // --pin
/// configuration.tls.clientIdentity = .init(certificateChainPEM: chain, privateKeyPEM: key)
/// ```
///
/// A pinned host trusts only the pinned certificates as anchors: its chain must lead to one
/// of them (a CA of the chain, or a self-signed server certificate), whatever the roots say;
/// any other chain ends the connection with ``FerryError/Reason/secureConnectionFailed``.
/// Pinning a public key (SPKI SHA-256) needs a verification hook that AsyncHTTPClient does
/// not offer yet, so it is not available.
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
        public var certificateChainPEM: String
        public var privateKeyPEM: String

        public init(certificateChainPEM: String, privateKeyPEM: String) {
            self.certificateChainPEM = certificateChainPEM
            self.privateKeyPEM = privateKeyPEM
        }
    }

    public var trustRoots: TrustRoots = .system
    /// Per host (lowercased name or address), the certificates (PEM) its chain must lead to.
    public var pinnedCertificates: [String: String] = [:]
    public var clientIdentity: ClientIdentity?
    /// Accept any certificate (curl's `--insecure`). Off, and meant to stay off.
    public var allowsInvalidCertificates = false

    public init() {}

    /// The configurations for the engine, checked: invalid PEM is an error now, not at the
    /// first connection.
    func resolved() throws(FerryError) -> ResolvedTLS {
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
            return ResolvedTLS(base: self == TLSOptions() ? nil : base, pinned: pinned)
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

    /// The configuration a request to `url` must use when it differs from the client's.
    func override(for url: URL) -> TLSConfiguration? {
        guard url.scheme?.lowercased() == "https", let host = url.host?.lowercased() else { return nil }
        return pinned[host]
    }
}
