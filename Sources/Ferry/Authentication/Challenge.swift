/// One challenge of a `WWW-Authenticate` field (RFC 9110 §11.6.1): a scheme and either
/// parameters or a token68.
struct Challenge: Equatable, Sendable {
    /// Lowercased.
    var scheme: String
    /// Parameter names lowercased; quoted values unquoted.
    var parameters: [String: String] = [:]
    var token68: String?

    subscript(name: String) -> String? { parameters[name] }

    /// Every challenge in `fields` (each a `WWW-Authenticate` value, which may hold several).
    ///
    /// ```
    /// Digest realm="a", qop="auth,auth-int", nonce="n", Basic realm="b"
    /// ```
    /// is two challenges: the comma inside the quoted `qop` belongs to it. Elements are split
    /// at commas outside quotes; an element that starts with a word and a space starts a new
    /// challenge, an element `name=value` is a parameter of the current one. Malformed
    /// elements are skipped, never guessed at.
    static func parse(_ fields: [String]) -> [Challenge] {
        var challenges: [Challenge] = []
        for field in fields {
            for element in Self.elements(of: field) {
                var rest = Substring(element)
                guard let word = Self.token(&rest) else { continue }
                if rest.isEmpty {
                    challenges.append(Challenge(scheme: word.lowercased()))
                } else if rest.first == " " || rest.first == "\t" {
                    // "Scheme param=value" or "Scheme token68".
                    var challenge = Challenge(scheme: word.lowercased())
                    let remainder = rest.drop { $0 == " " || $0 == "\t" }
                    if let (name, value) = Self.parameter(remainder) {
                        challenge.parameters[name] = value
                    } else if Self.isToken68(remainder) {
                        challenge.token68 = String(remainder)
                    }
                    challenges.append(challenge)
                } else if let (name, value) = Self.parameter(Substring(element)), !challenges.isEmpty {
                    challenges[challenges.count - 1].parameters[name] = value
                }
            }
        }
        return challenges
    }

    /// The comma-separated elements of `field`, trimmed, ignoring commas inside quotes.
    private static func elements(of field: String) -> [String] {
        var elements: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in field {
            if escaped {
                escaped = false
            } else if quoted && character == "\\" {
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
            } else if character == "," && !quoted {
                elements.append(current)
                current = ""
                continue
            }
            current.append(character)
        }
        elements.append(current)
        return elements.map { $0.trimmingWhitespace() }.filter { !$0.isEmpty }
    }

    private static func isTokenCharacter(_ character: Character) -> Bool {
        guard character.isASCII, let ascii = character.asciiValue else { return false }
        if (0x30...0x39).contains(ascii) || (0x41...0x5A).contains(ascii) || (0x61...0x7A).contains(ascii) {
            return true
        }
        return "!#$%&'*+-.^_`|~".contains(character)
    }

    /// Takes a token from the front of `text`.
    private static func token(_ text: inout Substring) -> String? {
        let word = text.prefix(while: isTokenCharacter)
        guard !word.isEmpty else { return nil }
        text = text.dropFirst(word.count)
        return String(word)
    }

    /// `name = value` with a token or quoted-string value; `nil` for anything else.
    private static func parameter(_ element: Substring) -> (String, String)? {
        var rest = element
        guard let name = token(&rest) else { return nil }
        rest = rest.drop { $0 == " " || $0 == "\t" }
        guard rest.first == "=" else { return nil }
        rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" }
        if rest.first == "\"" {
            var value = ""
            var escaped = false
            var closed = false
            for character in rest.dropFirst() {
                if escaped {
                    value.append(character)
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    closed = true
                    break
                } else {
                    value.append(character)
                }
            }
            return closed ? (name.lowercased(), value) : nil
        }
        guard let value = token(&rest), rest.allSatisfy({ $0 == " " || $0 == "\t" }) else { return nil }
        return (name.lowercased(), value)
    }

    /// RFC 9110's token68: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
    private static func isToken68(_ text: Substring) -> Bool {
        let body = text.prefix { $0 != "=" }
        let padding = text.dropFirst(body.count)
        return !body.isEmpty && padding.allSatisfy { $0 == "=" }
            && body.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-._~+/".contains($0)) }
    }
}
