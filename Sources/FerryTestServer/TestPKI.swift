import Crypto
import Foundation
import NIOSSL
import X509

/// A certificate authority made at run time, and server certificates it signs, for TLS tests
/// (nothing private is ever committed or reused between runs).
///
/// ```swift
/// let ca = try TestPKI(name: "Ferry Test CA")
/// let identity = try ca.issueServerIdentity(for: ["127.0.0.1", "localhost"])
/// let server = try await FerryTestServer.start(tls: identity)
/// ```
public struct TestPKI: Sendable {
    /// A certificate chain and its private key, in PEM.
    public struct Identity: Sendable {
        public let certificatePEM: String
        public let privateKeyPEM: String
        /// Base64 SHA-256 of the certificate's SubjectPublicKeyInfo (an RFC 7469 pin).
        public let publicKeyPin: String
    }

    /// The CA's private key, raw (the key type itself is not `Sendable`).
    private let keyBytes: Data
    private let name: DistinguishedName
    private var key: P256.Signing.PrivateKey {
        get throws { try P256.Signing.PrivateKey(rawRepresentation: keyBytes) }
    }
    /// The CA's own certificate, in PEM: what a client trusts or pins.
    public let certificatePEM: String
    /// Base64 SHA-256 of the CA's SubjectPublicKeyInfo (an RFC 7469 pin).
    public let publicKeyPin: String

    public init(name: String) throws {
        let key = P256.Signing.PrivateKey()
        keyBytes = key.rawRepresentation
        self.name = try DistinguishedName { CommonName(name) }
        let now = Date()
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86_400),
            issuer: self.name,
            subject: self.name,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(key)
        )
        certificatePEM = try certificate.serializeAsPEM().pemString
        publicKeyPin = Self.pin(key.publicKey)
    }

    /// Computed from the key itself (swift-crypto's DER is the SubjectPublicKeyInfo), not
    /// from the certificate, so it checks the client's reading of certificates.
    private static func pin(_ key: P256.Signing.PublicKey) -> String {
        Data(SHA256.hash(data: key.derRepresentation)).base64EncodedString()
    }

    /// A server certificate for `hosts` (DNS names or IPv4 addresses), signed by this CA.
    public func issueServerIdentity(for hosts: [String], clientAuth: Bool = false) throws -> Identity {
        let leafKey = P256.Signing.PrivateKey()
        let now = Date()
        let names: [GeneralName] = hosts.map { host in
            let octets = host.split(separator: ".").compactMap { UInt8($0) }
            return octets.count == 4 ? .ipAddress(.init(contentBytes: octets[...])) : .dnsName(host)
        }
        let certificate = try Certificate(
            version: .v3,
            serialNumber: Certificate.SerialNumber(),
            publicKey: .init(leafKey.publicKey),
            notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86_400),
            issuer: name,
            subject: try DistinguishedName { CommonName(hosts.first ?? "localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage(clientAuth ? [.clientAuth] : [.serverAuth])
                SubjectAlternativeNames(names)
            },
            issuerPrivateKey: .init(try key)
        )
        return Identity(
            certificatePEM: try certificate.serializeAsPEM().pemString,
            privateKeyPEM: leafKey.pemRepresentation,
            publicKeyPin: Self.pin(leafKey.publicKey)
        )
    }
}

extension TestPKI.Identity {
    /// A server-side TLS configuration presenting this identity; with `clientCA`, clients
    /// must present a certificate that CA signed.
    func serverConfiguration(requiringClientCertificatesFrom clientCA: String?) throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(certificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(privateKeyPEM.utf8), format: .pem))
        )
        if let clientCA {
            configuration.certificateVerification = .noHostnameVerification
            configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(clientCA.utf8)))
        }
        return configuration
    }
}
