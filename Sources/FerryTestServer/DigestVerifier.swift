import Crypto
import Foundation

/// The server side of HTTP Digest (RFC 7616) for `/digest-auth`: issues challenges and checks
/// answers. Written from the RFC's definitions, apart from the client's code, and checked
/// against curl in the tests.
struct DigestVerifier: Sendable {
    let realm: String
    let user: String
    let password: String
    /// `MD5`, `MD5-sess`, `SHA-256` or `SHA-256-sess`.
    let algorithm: String
    /// `auth`, or empty for RFC 2069 (no qop).
    let qop: String

    func challenge(nonce: String, opaque: String) -> String {
        var fields = ["realm=\"\(realm)\"", "nonce=\"\(nonce)\"", "opaque=\"\(opaque)\"", "algorithm=\(algorithm)"]
        if !qop.isEmpty { fields.insert("qop=\"\(qop)\"", at: 1) }
        return "Digest " + fields.joined(separator: ", ")
    }

    private func hash(_ text: String) -> String {
        let bytes = Data(text.utf8)
        if algorithm.uppercased().hasPrefix("SHA-256") {
            return SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
        }
        return Insecure.MD5.hash(data: bytes).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `authorization` answers a challenge of this verifier for `method` and `uri`.
    func accepts(_ authorization: String?, method: String, uri: String) -> Bool {
        guard let authorization, authorization.lowercased().hasPrefix("digest ") else { return false }
        let fields = Self.fields(String(authorization.dropFirst("digest ".count)))
        guard fields["username"] == user, fields["realm"] == realm, fields["uri"] == uri,
            let nonce = fields["nonce"], let response = fields["response"],
            (fields["algorithm"] ?? "MD5").lowercased() == algorithm.lowercased()
        else { return false }
        var ha1 = hash("\(user):\(realm):\(password)")
        if algorithm.lowercased().hasSuffix("-sess") {
            guard let cnonce = fields["cnonce"] else { return false }
            ha1 = hash("\(ha1):\(nonce):\(cnonce)")
        }
        let ha2 = hash("\(method):\(uri)")
        if qop.isEmpty { return response == hash("\(ha1):\(nonce):\(ha2)") }
        guard fields["qop"] == qop, let nc = fields["nc"], let cnonce = fields["cnonce"] else { return false }
        return response == hash("\(ha1):\(nonce):\(nc):\(cnonce):\(qop):\(ha2)")
    }

    /// `name=value` pairs of an Authorization value; quoted values unquoted.
    static func fields(_ text: String) -> [String: String] {
        var result: [String: String] = [:]
        var index = text.startIndex
        while index < text.endIndex {
            while index < text.endIndex, text[index] == " " || text[index] == "," { index = text.index(after: index) }
            guard let equals = text[index...].firstIndex(of: "=") else { break }
            let name = text[index..<equals].trimmingCharacters(in: .whitespaces).lowercased()
            index = text.index(after: equals)
            var value = ""
            if index < text.endIndex, text[index] == "\"" {
                index = text.index(after: index)
                while index < text.endIndex, text[index] != "\"" {
                    if text[index] == "\\" { index = text.index(after: index) }
                    if index < text.endIndex { value.append(text[index]) }
                    index = text.index(after: index)
                }
                if index < text.endIndex { index = text.index(after: index) }
            } else {
                let end = text[index...].firstIndex(of: ",") ?? text.endIndex
                value = text[index..<end].trimmingCharacters(in: .whitespaces)
                index = end
            }
            result[name] = value
        }
        return result
    }
}
