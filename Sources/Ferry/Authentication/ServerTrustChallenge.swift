public import Foundation

/// A server's certificate chain, shown to the delegate before a connection to it is used:
/// URLSession's server-trust challenge (`NSURLAuthenticationMethodServerTrust`).
///
/// Asked only when ``TLSOptions/delegateEvaluatesServerTrust`` is on, once per new
/// connection, after the session's own evaluation (trust roots, pinned certificates, pinned
/// public keys), whose verdict is in ``defaultEvaluationError``. The connection waits for the
/// answer.
///
/// ```swift
/// func session(_ session: Session, didReceive challenge: ServerTrustChallenge) async
///     -> ServerTrustDisposition
/// {
///     // Trust a device's self-signed certificate by its key, whatever the roots say.
///     challenge.host == "printer.local" && challenge.publicKeySHA256.first == knownKey
///         ? .trust : .performDefaultHandling
/// }
/// ```
public struct ServerTrustChallenge: Sendable {
    /// The host the connection is for (lowercased name or address).
    public let host: String
    /// The port connected to.
    public let port: Int
    /// The chain the server sent, in DER, its own certificate first.
    public let certificates: [Data]
    /// Base64 SHA-256 of each certificate's SubjectPublicKeyInfo, in the order of
    /// ``certificates``: the form ``TLSOptions/pinnedPublicKeys`` and curl's
    /// `--pinnedpubkey sha256//…` use.
    public let publicKeySHA256: [String]
    /// Why the session's own evaluation refuses the chain, or `nil` when it trusts it:
    /// what ``ServerTrustDisposition/performDefaultHandling`` decides.
    public let defaultEvaluationError: String?
}

/// The delegate's answer to a ``ServerTrustChallenge``.
public enum ServerTrustDisposition: Sendable, Equatable {
    /// Let the session's own evaluation decide.
    case performDefaultHandling
    /// Trust this chain for this connection (URLSession's `.useCredential` with the trust),
    /// even where the session's evaluation refuses it.
    case trust
    /// Refuse the connection: its requests fail with
    /// ``FerryError/Reason/secureConnectionFailed``.
    case cancel
}
