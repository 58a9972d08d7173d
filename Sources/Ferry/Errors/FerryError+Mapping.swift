import AsyncHTTPClient
import Foundation
import NIOCore
import NIOExtras
import NIOHTTP1
import NIOHTTP2
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
            case .readTimeout, .connectTimeout, .tlsHandshakeTimeout, .socksHandshakeTimeout,
                .httpProxyHandshakeTimeout:
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
        if error is NIOSSLCloseTimedOutError {
            return FerryError(
                .timedOut(.idle),
                "The peer did not answer TLS's close_notify in time.",
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
        if let error = error as? NIOHTTP2Errors.StreamClosed {
            // RST_STREAM: the server gave up on this response (nginx, when its upstream broke
            // off); the connection and its other streams go on.
            return FerryError(
                .network,
                "The server reset the HTTP/2 stream (\(name(of: error.errorCode))) before the response was complete.",
                underlying: error
            )
        }
        if error is HTTP2Connection.MalformedResponse || error is NIOHTTP2Errors.ContentLengthViolated {
            return FerryError(.badServerResponse, "The server's HTTP/2 response is not valid.", underlying: error)
        }
        if error is NIOHTTP2Errors.FlowControlViolation {
            return FerryError(
                .badServerResponse,
                "The server sent more than HTTP/2's flow control allowed (FLOW_CONTROL_ERROR).",
                underlying: error
            )
        }
        if error is NIOHTTP2Errors.UnableToParseFrame || error is NIOHTTP2Errors.ExcessiveEmptyDataFrames {
            return FerryError(.badServerResponse, "The server's HTTP/2 frames are not valid.", underlying: error)
        }
        if error is HTTPParserError {
            return FerryError(.badServerResponse, "The server's response is not valid HTTP.", underlying: error)
        }
        return FerryError(.network, "The connection failed.", underlying: error)
    }

    /// RFC 9113's name of an HTTP/2 error code (§7), as servers' logs and curl print it.
    private static func name(of code: HTTP2ErrorCode) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
            "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return names.indices.contains(code.networkCode)
            ? names[code.networkCode] : "error 0x" + String(code.networkCode, radix: 16)
    }
}

extension FerryError {
    /// The error for a status a download does not accept; the first 64 KiB of its body are
    /// kept in the error, never written to a file.
    static func unacceptableStatus(_ head: HTTPResponse, body: ResponseBody) async -> FerryError {
        let prefix = try? await body.collect(upTo: 64 * 1024)
        return FerryError(
            .unacceptableStatusCode(head.statusCode),
            "\(head.url.absoluteString): HTTP \(head.statusCode)\(head.reasonPhrase.isEmpty ? "" : " " + head.reasonPhrase)",
            response: head,
            responseBodyPrefix: prefix.map { Data($0.readableBytesView) }
        )
    }
}
