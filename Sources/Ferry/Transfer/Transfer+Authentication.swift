import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension Transfer {
    /// The request to send again with credentials after `response`, or `nil` when the response
    /// stands (not a challenge, nothing to answer with, or the delegate said so).
    ///
    /// Order, as URLSession's: the delegate; on default handling the session's
    /// ``SessionConfiguration/credential`` (only for the task's own origin), then its
    /// ``SessionConfiguration/credentialStore``. Default handling answers once per request; a
    /// refused credential is not sent again. How many challenges are answered at most is the
    /// request loop's to say (``RequestLoop/answersChallenge``). The strongest scheme offered wins: Digest with
    /// SHA-256, Digest with MD5, then Basic.
    func authenticate(
        _ request: URLRequest,
        after response: HTTPResponse,
        home: Origin?,
        failures: Int,
        userAuthorization: Bool
    ) async throws -> URLRequest? {
        guard response.statusCode == 401, !userAuthorization, let url = request.url else { return nil }
        let challenges = Challenge.parse(response.headers.values(for: "WWW-Authenticate"))
        guard let chosen = AnswerableChallenge.strongest(challenges) else { return nil }
        let space = ProtectionSpace(url: url, realm: chosen.realm, authenticationMethod: chosen.method)
        let sameOrigin = Origin(url) == home
        let proposed = sameOrigin ? configuration.credential : nil
        guard
            let credential = try await credential(
                for: space,
                failures: failures,
                response: response,
                fallback: proposed ?? configuration.credentialStore?.credential(for: space),
                defaultAnswers: failures == 0
            )
        else { return nil }
        var retry = request
        retry.setValue(
            chosen.authorization(credential, request: request),
            forHTTPHeaderField: "Authorization"
        )
        return retry
    }

    /// The `Proxy-Authorization` to answer the proxy's `407` with, or `nil` when there is
    /// none to give: the delegate first (a proxy protection space), then on default handling
    /// the proxy's configured credential, then the credential store; the strongest scheme
    /// offered. A Digest answer is computed for `CONNECT host:port`.
    func authenticateProxy(_ challenge: ProxyChallenge, failures: Int) async throws -> String? {
        guard let chosen = AnswerableChallenge.strongest(Challenge.parse(challenge.challenges)) else { return nil }
        let proxy = challenge.proxy
        let space = ProtectionSpace(
            scheme: "http",
            host: proxy.host,
            port: proxy.port,
            realm: chosen.realm,
            authenticationMethod: chosen.method,
            isProxy: true
        )
        guard let url = URL(string: "http://\(proxy.host):\(proxy.port)") else { return nil }
        let headers = HeaderFields(challenge.challenges.map { (name: "Proxy-Authenticate", value: $0) })
        guard
            let credential = try await credential(
                for: space,
                failures: failures,
                response: HTTPResponse(url: url, statusCode: 407, headers: headers),
                fallback: proxy.credential ?? configuration.credentialStore?.credential(for: space),
                // The configured credential went with the first CONNECT already, when there is one.
                defaultAnswers: failures == 0 || proxy.credential == nil
            )
        else { return nil }
        guard let digest = chosen.digest else { return credential.authorization }
        return digest.authorization(for: credential, method: "CONNECT", uri: "\(proxy.host):\(proxy.port)")
    }

    /// The credential to answer a challenge for `space` with: the delegate's, or on default
    /// handling `fallback` when `defaultAnswers`; `nil` to answer nothing.
    private func credential(
        for space: ProtectionSpace,
        failures: Int,
        response: HTTPResponse,
        fallback: Credential?,
        defaultAnswers: Bool
    ) async throws -> Credential? {
        var disposition = ChallengeDisposition.performDefaultHandling
        if let delegate = session.delegate {
            let challenge = AuthenticationChallenge(
                protectionSpace: space,
                previousFailureCount: failures,
                failureResponse: response,
                proposedCredential: fallback
            )
            let session = self.session
            let task = self.origin
            disposition = await session.hub.ask {
                await delegate.session(session, task: task, didReceive: challenge)
            }
        }
        switch disposition {
        case .useCredential(let credential):
            return credential
        case .performDefaultHandling:
            return defaultAnswers ? fallback : nil
        case .rejectProtectionSpace:
            return nil
        case .cancelAuthenticationChallenge:
            throw FerryError(
                .cancelledByDelegate,
                "The delegate cancelled the authentication challenge for \(space).",
                response: response
            )
        }
    }
}

/// A challenge Ferry can answer, and which one of those offered it answers: the strongest
/// Digest (RFC 7616), else Basic. A value with no I/O.
struct AnswerableChallenge {
    let realm: String?
    let method: ProtectionSpace.AuthenticationMethod
    let digest: DigestAuthentication?

    func authorization(_ credential: Credential, request: URLRequest) -> String {
        guard let digest, let url = request.url else { return credential.authorization }
        return digest.authorization(for: credential, method: request.method.rawValue, uri: url.requestTarget)
    }

    /// The strongest challenge of those offered that Ferry can answer.
    static func strongest(_ challenges: [Challenge]) -> AnswerableChallenge? {
        let digests = challenges.compactMap(DigestAuthentication.init).sorted {
            $0.algorithm.strength > $1.algorithm.strength
        }
        if let digest = digests.first {
            return AnswerableChallenge(realm: digest.realm, method: .digest, digest: digest)
        }
        if let basic = challenges.first(where: { $0.scheme == "basic" }) {
            return AnswerableChallenge(realm: basic["realm"], method: .basic, digest: nil)
        }
        return nil
    }
}
