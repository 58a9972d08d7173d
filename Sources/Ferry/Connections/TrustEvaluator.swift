import Crypto
import Foundation
import NIOSSL
import X509

/// Decides whether a server's certificate chain is trusted for a host, for the connections
/// Ferry verifies itself (``TLSOptions/pinnedPublicKeys``,
/// ``TLSOptions/delegateEvaluatesServerTrust``).
///
/// The same rules as the connections NIOSSL verifies, plus the key pins: the chain must lead
/// to one of the roots (a pinned host's pinned certificates replace them), be valid now
/// under RFC 5280, and name the host (DNS name or IP address). No I/O but reading the
/// system's roots once.
struct TrustEvaluator: Sendable {
    enum Roots: Sendable {
        case system
        case custom([Certificate])
        case systemAnd([Certificate])
    }

    let roots: Roots
    /// Per host: the only anchors its chain may lead to.
    let pinnedCertificates: [String: [Certificate]]
    /// Per host: Base64 SHA-256 digests of SubjectPublicKeyInfo, one of which the validated
    /// chain must carry.
    let pinnedKeys: [String: Set<String>]
    let allowsInvalidCertificates: Bool
    let asksDelegate: Bool
    /// Every request goes through the bridge, `http` too (connection metrics).
    let bridgesEverything: Bool
    /// The client side of the connections Ferry verifies (client identity, versions).
    let connection: TLSConfiguration

    /// Whether a request to `url` goes over a connection Ferry makes (and, for `https`,
    /// verifies) itself.
    func bridges(_ url: URL) -> Bool {
        guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return false }
        if bridgesEverything { return scheme == "http" || scheme == "https" }
        return scheme == "https" && (asksDelegate || pinnedKeys[host] != nil)
    }

    /// The session's verdict on `chain` (leaf first) for `host`: `nil` when trusted, else
    /// why not, in words for an error message.
    func verdict(on chain: [NIOSSLCertificate], host: String) async -> String? {
        guard !chain.isEmpty else { return "The server sent no certificate." }
        let certificates: [Certificate]
        do {
            certificates = try chain.map { try Certificate(derEncoded: try $0.toDERBytes()) }
        } catch {
            return "The server's certificate is not valid DER: \(error)."
        }
        // allowsInvalidCertificates (-k) skips the chain and name checks, never a pin: pinned
        // certificates are verified in full (as on connections NIOSSL verifies), and a pinned
        // key must be the server's own, the leaf's (as curl's -k --pinnedpubkey: an unchecked
        // chain could carry any CA's certificate beside the attacker's leaf).
        if allowsInvalidCertificates && pinnedCertificates[host] == nil {
            if let pins = pinnedKeys[host], !pins.contains(Self.publicKeySHA256(certificates[0])) {
                return
                    "The server's certificate does not carry a public key pinned for \(host) (certificate checks are off, pins are not)."
            }
            return nil
        }
        var verifier = Verifier(rootCertificates: await store(for: host)) {
            RFC5280Policy()
            Self.identityPolicy(for: host)
        }
        let validated: [Certificate]
        switch await verifier.validate(
            leaf: certificates[0],
            intermediates: CertificateStore(certificates.dropFirst())
        ) {
        case .validCertificate(let chain):
            validated = Array(chain)
        case .couldNotValidate(let failures):
            guard let failure = failures.first else {
                return "The server's certificate does not lead to a trusted root"
                    + (pinnedCertificates[host] == nil ? "." : " (the pinned certificates).")
            }
            return "The server's certificate is not valid for \(host): \(failure.policyFailureReason)."
        }
        if let pins = pinnedKeys[host], !validated.contains(where: { pins.contains(Self.publicKeySHA256($0)) }) {
            return "No certificate of the server's chain carries a public key pinned for \(host)."
        }
        return nil
    }

    /// What the delegate is shown.
    func challenge(chain: [NIOSSLCertificate], host: String, port: Int, verdict: String?) -> ServerTrustChallenge {
        let certificates = chain.compactMap { try? Certificate(derEncoded: try $0.toDERBytes()) }
        return ServerTrustChallenge(
            host: host,
            port: port,
            certificates: chain.compactMap { (try? $0.toDERBytes()).map { Data($0) } },
            publicKeySHA256: certificates.map(Self.publicKeySHA256),
            defaultEvaluationError: verdict
        )
    }

    /// Base64 SHA-256 of the certificate's DER SubjectPublicKeyInfo (RFC 7469's pin).
    static func publicKeySHA256(_ certificate: Certificate) -> String {
        guard let document = try? certificate.publicKey.serializeAsPEM() else { return "" }
        return Data(SHA256.hash(data: document.derBytes)).base64EncodedString()
    }

    private func store(for host: String) async -> CertificateStore {
        if let pinned = pinnedCertificates[host] { return CertificateStore(pinned) }
        switch roots {
        case .system: return CertificateStore.systemTrustRoots
        case .custom(let certificates): return CertificateStore(certificates)
        case .systemAnd(let certificates): return CertificateStore.systemTrustRoots.appending(contentsOf: certificates)
        }
    }

    private static func identityPolicy(for host: String) -> ServerIdentityPolicy {
        let isAddress = host.isIPAddress
        return ServerIdentityPolicy(serverHostname: isAddress ? nil : host, serverIP: isAddress ? host : nil)
    }
}
