import Crypto
import Foundation

/// Answers an HTTP Digest challenge (RFC 7616): `MD5`, `SHA-256` and their `-sess` variants,
/// `qop=auth` (or the RFC 2069 form without `qop`), `userhash`, `opaque`.
///
/// `auth-int` (a hash of the body) is not offered: Ferry streams bodies and would have to read
/// them twice; a challenge that allows only `auth-int` is not answered.
struct DigestAuthentication: Sendable {
    enum Algorithm: String, Sendable, CaseIterable {
        case md5 = "MD5"
        case md5Session = "MD5-sess"
        case sha256 = "SHA-256"
        case sha256Session = "SHA-256-sess"

        /// Stronger first: what a client picks among several offered challenges.
        var strength: Int { self == .sha256 || self == .sha256Session ? 2 : 1 }
        var isSession: Bool { self == .md5Session || self == .sha256Session }

        func hash(_ text: String) -> String {
            switch self {
            case .md5, .md5Session:
                return Insecure.MD5.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
            case .sha256, .sha256Session:
                return SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
            }
        }
    }

    let realm: String
    let nonce: String
    let opaque: String?
    let algorithm: Algorithm
    /// `auth`, or `nil` for RFC 2069 (no `qop` offered).
    let qop: String?
    let userhash: Bool

    /// `nil` when the challenge is not a Digest challenge Ferry can answer.
    init?(_ challenge: Challenge) {
        guard challenge.scheme == "digest", let realm = challenge["realm"], let nonce = challenge["nonce"] else {
            return nil
        }
        let name = challenge["algorithm"] ?? "MD5"
        guard let algorithm = Algorithm.allCases.first(where: { $0.rawValue.lowercased() == name.lowercased() }) else {
            return nil
        }
        if let offered = challenge["qop"] {
            let options = offered.split(separator: ",").map { String($0).trimmingWhitespace().lowercased() }
            guard options.contains("auth") else { return nil }
            qop = "auth"
        } else {
            qop = nil
        }
        self.realm = realm
        self.nonce = nonce
        self.opaque = challenge["opaque"]
        self.algorithm = algorithm
        self.userhash = challenge["userhash"]?.lowercased() == "true"
    }

    /// The `Authorization` value for `method` and `uri` (the request target as sent).
    func authorization(
        for credential: Credential,
        method: String,
        uri: String,
        cnonce: String = Self.makeClientNonce(),
        nonceCount: Int = 1
    ) -> String {
        let nc = String(format: "%08x", nonceCount)
        var ha1 = algorithm.hash("\(credential.user):\(realm):\(credential.password)")
        if algorithm.isSession { ha1 = algorithm.hash("\(ha1):\(nonce):\(cnonce)") }
        let ha2 = algorithm.hash("\(method):\(uri)")
        let response: String
        if let qop {
            response = algorithm.hash("\(ha1):\(nonce):\(nc):\(cnonce):\(qop):\(ha2)")
        } else {
            response = algorithm.hash("\(ha1):\(nonce):\(ha2)")
        }
        let username = userhash ? algorithm.hash("\(credential.user):\(realm)") : credential.user
        var fields = [
            "username=\(Self.quoted(username))",
            "realm=\(Self.quoted(realm))",
            "uri=\(Self.quoted(uri))",
            "algorithm=\(algorithm.rawValue)",
            "nonce=\(Self.quoted(nonce))",
        ]
        if let qop { fields += ["nc=\(nc)", "cnonce=\(Self.quoted(cnonce))", "qop=\(qop)"] }
        fields.append("response=\(Self.quoted(response))")
        if let opaque { fields.append("opaque=\(Self.quoted(opaque))") }
        if userhash { fields.append("userhash=true") }
        return "Digest " + fields.joined(separator: ", ")
    }

    static func makeClientNonce() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    private static func quoted(_ value: String) -> String {
        "\"" + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
