import Foundation

/// A parsed `Content-Disposition` header (RFC 6266), as far as a downloader needs it.
///
/// `filename*` (RFC 8187, `UTF-8''percent%20encoded`) wins over `filename`. The result is
/// still untrusted: pass it through ``SafeFilename/sanitize(_:fallback:)``.
public struct ContentDisposition: Sendable, Equatable {
    /// `attachment`, `inline`, …, lower-cased.
    public var type: String
    /// The file name the server suggests, decoded but not yet made safe.
    public var filename: String?

    /// Parses a header value; `nil` when it holds no disposition type.
    public init?(parsing value: String) {
        var scanner = HeaderParameterScanner(value)
        guard let type = scanner.token(), !type.isEmpty else { return nil }
        self.type = type.lowercased()
        var plain: String?
        var extended: String?
        while scanner.skip(";") {
            guard let name = scanner.token()?.lowercased(), scanner.skip("=") else { break }
            let parameterValue = scanner.quotedString() ?? scanner.token() ?? ""
            switch name {
            case "filename": plain = parameterValue
            case "filename*": extended = Self.decodeExtended(parameterValue)
            default: continue
            }
        }
        self.filename = extended ?? plain
    }

    /// Decodes `charset'lang'percent-encoded` (RFC 8187); only UTF-8 and ISO-8859-1.
    static func decodeExtended(_ value: String) -> String? {
        let parts = value.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let charset = parts[0].lowercased()
        let encoded = String(parts[2])
        var bytes: [UInt8] = []
        var iterator = Array(encoded.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        switch charset {
        case "utf-8": return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1": return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
        default: return nil
        }
    }
}

/// A small scanner for `token; name=value; name="quoted"` header syntax (RFC 9110 §5.6).
struct HeaderParameterScanner {
    private let scalars: [Unicode.Scalar]
    private var index = 0

    init(_ value: String) { scalars = Array(value.unicodeScalars) }

    private mutating func skipSpaces() {
        while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 }
    }

    mutating func skip(_ scalar: Unicode.Scalar) -> Bool {
        skipSpaces()
        guard index < scalars.count, scalars[index] == scalar else { return false }
        index += 1
        return true
    }

    mutating func token() -> String? {
        skipSpaces()
        let start = index
        while index < scalars.count, !";=\" \t,".unicodeScalars.contains(scalars[index]) {
            index += 1
        }
        guard index > start else { return nil }
        return String(String.UnicodeScalarView(scalars[start..<index]))
    }

    mutating func quotedString() -> String? {
        skipSpaces()
        guard index < scalars.count, scalars[index] == "\"" else { return nil }
        index += 1
        var result = String.UnicodeScalarView()
        while index < scalars.count {
            let scalar = scalars[index]
            index += 1
            if scalar == "\\", index < scalars.count {
                result.append(scalars[index])
                index += 1
            } else if scalar == "\"" {
                return String(result)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }
}
