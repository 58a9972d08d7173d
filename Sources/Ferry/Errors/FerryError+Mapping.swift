import AsyncHTTPClient
import Foundation
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOHTTPCompression
import NIOSSL

extension FerryError {
    /// The typed error for an error of the layers below (AsyncHTTPClient, NIO, TLS); an
    /// error that is already a `FerryError` is kept.
    static func mapping(_ error: any Error) -> FerryError {
        if let error = error as? FerryError { return error }
        if error is CancellationError { return .cancelled() }
        if let error = error as? HTTPClientError {
            switch error {
            case .cancelled: return .cancelled()
            case .invalidURL, .emptyHost, .emptyScheme:
                return FerryError(.invalidURL, "The URL is not valid.", underlying: error)
            case .bodyLengthMismatch:
                return FerryError(
                    .uploadBodyFailed,
                    "The request body did not match its declared length.",
                    underlying: error
                )
            case .readTimeout, .connectTimeout:
                return FerryError(.timedOut(.idle), "The connection timed out.", underlying: error)
            case .remoteConnectionClosed:
                return FerryError(
                    .network,
                    "The server closed the connection before the response was complete.",
                    underlying: error
                )
            default:
                return FerryError(.network, "The transfer failed.", underlying: error)
            }
        }
        if let error = error as? NIOHTTP1ProxyConnectHandler.Error, error == .httpProxyHandshakeTimeout() {
            return FerryError(
                .timedOut(.idle),
                "The proxy did not answer the tunnel request (CONNECT) in time.",
                underlying: error
            )
        }
        if error is NIOHTTPDecompression.DecompressionError {
            return FerryError(
                .badServerResponse,
                "The compressed body inflates past maximumInMemoryBodySize, or is not valid gzip / deflate.",
                underlying: error
            )
        }
        if error is NIOSSLError || error is BoringSSLError {
            return FerryError(
                .secureConnectionFailed,
                "The TLS handshake failed: the server's certificate is not trusted for this host (or not the pinned one).",
                underlying: error
            )
        }
        if let challenge = error as? ProxyChallenge {
            return FerryError(
                .unacceptableStatusCode(407),
                "The proxy \(challenge.proxy.host):\(challenge.proxy.port) asks for credentials (407) that the session does not have or that it refused."
            )
        }
        if error is HTTPParserError {
            return FerryError(.badServerResponse, "The server's response is not valid HTTP.", underlying: error)
        }
        return FerryError(.network, "The connection failed.", underlying: error)
    }
}
