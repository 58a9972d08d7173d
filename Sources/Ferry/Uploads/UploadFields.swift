import Foundation

/// The header fields of the resumable-upload protocol (draft-ietf-httpbis-resumable-upload),
/// read from a response and written to requests.
///
/// Each field is a Structured Field (RFC 9651): `Upload-Offset` and `Upload-Length` are
/// non-negative Integers, `Upload-Complete` a Boolean, `Upload-Limit` a Dictionary of
/// Integers, `Upload-Draft-Interop-Version` an Integer. A value of another shape makes the
/// whole field ignored, as the draft says; a member of `Upload-Limit` with an unknown key is
/// ignored, a known key with a value that is not an Integer makes the field ignored.
struct UploadFields: Sendable, Equatable {
    /// `Upload-Offset`: the bytes the upload resource holds.
    var offset: Int64?
    /// `Upload-Complete`: whether the upload is complete (a response from the target
    /// resource), `nil` when absent.
    var complete: Bool?
    /// `Upload-Length`: the whole representation's length, when the server knows it.
    var length: Int64?
    /// `Upload-Limit`, when present and well formed.
    var limits: UploadLimits?
    /// `Upload-Draft-Interop-Version`.
    var interopVersion: Int?
    /// tus: `Tus-Version`, the protocol versions the server speaks.
    var tusVersions: [String] = []
    /// tus: `Tus-Extension`.
    var tusExtensions: [String] = []
    /// tus: `Tus-Max-Size`.
    var tusMaximumSize: Int64?
    /// tus: `Tus-Checksum-Algorithm`, lowercased.
    var tusChecksumAlgorithms: [String] = []

    /// The names of the fields.
    enum Name {
        static let offset = "Upload-Offset"
        static let complete = "Upload-Complete"
        static let length = "Upload-Length"
        static let limit = "Upload-Limit"
        static let interopVersion = "Upload-Draft-Interop-Version"
        static let tusResumable = "Tus-Resumable"
        static let tusVersion = "Tus-Version"
        static let tusExtension = "Tus-Extension"
        static let tusMaximumSize = "Tus-Max-Size"
        static let uploadMetadata = "Upload-Metadata"
        static let tusChecksumAlgorithm = "Tus-Checksum-Algorithm"
        static let uploadChecksum = "Upload-Checksum"
    }

    init(
        offset: Int64? = nil,
        complete: Bool? = nil,
        length: Int64? = nil,
        limits: UploadLimits? = nil,
        interopVersion: Int? = nil,
        tusVersions: [String] = [],
        tusExtensions: [String] = [],
        tusMaximumSize: Int64? = nil,
        tusChecksumAlgorithms: [String] = []
    ) {
        self.offset = offset
        self.complete = complete
        self.length = length
        self.limits = limits
        self.interopVersion = interopVersion
        self.tusVersions = tusVersions
        self.tusExtensions = tusExtensions
        self.tusMaximumSize = tusMaximumSize
        self.tusChecksumAlgorithms = tusChecksumAlgorithms
    }

    /// The fields of `headers`; a field that is repeated or malformed counts as absent.
    init(_ headers: HeaderFields) {
        func single(_ name: String) -> String? {
            let values = headers.values(for: name)
            return values.count == 1 ? values[0] : nil
        }
        offset = single(Name.offset).flatMap(StructuredField.nonNegativeInteger)
        complete = single(Name.complete).flatMap(StructuredField.boolean)
        length = single(Name.length).flatMap(StructuredField.nonNegativeInteger)
        limits = single(Name.limit).flatMap(UploadLimits.init(fieldValue:))
        interopVersion = single(Name.interopVersion).flatMap(StructuredField.nonNegativeInteger).map { Int($0) }
        func list(_ name: String) -> [String] {
            headers.values(for: name).flatMap { $0.split(separator: ",") }
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        tusVersions = list(Name.tusVersion)
        tusExtensions = list(Name.tusExtension)
        tusMaximumSize = single(Name.tusMaximumSize).flatMap(StructuredField.nonNegativeInteger)
        tusChecksumAlgorithms = list(Name.tusChecksumAlgorithm).map { $0.lowercased() }
    }

    /// tus's `Upload-Metadata`: each key with its value in base64, keys in order.
    static func tusMetadata(_ metadata: [String: String]) -> String? {
        guard !metadata.isEmpty else { return nil }
        return metadata.sorted { $0.key < $1.key }
            .map { "\($0.key) \(Data($0.value.utf8).base64EncodedString())" }
            .joined(separator: ",")
    }

    /// A Boolean's serialization.
    static func serialize(_ value: Bool) -> String { value ? "?1" : "?0" }
}

/// The limits a server announces in `Upload-Limit`.
struct UploadLimits: Sendable, Equatable {
    /// `max-size`: the largest representation the server takes.
    var maximumSize: Int64?
    /// `min-size`: below this, the server may not offer resumption.
    var minimumSize: Int64?
    /// `max-append-size`: the most content one creation or append request may carry.
    var maximumAppendSize: Int64?
    /// `min-append-size`: the least content an append that does not complete the upload
    /// may carry.
    var minimumAppendSize: Int64?
    /// `max-age` (interop version 6 and earlier: `expires`): seconds the upload resource lives
    /// from the response.
    var maximumAge: Int64?

    init(
        maximumSize: Int64? = nil,
        minimumSize: Int64? = nil,
        maximumAppendSize: Int64? = nil,
        minimumAppendSize: Int64? = nil,
        maximumAge: Int64? = nil
    ) {
        self.maximumSize = maximumSize
        self.minimumSize = minimumSize
        self.maximumAppendSize = maximumAppendSize
        self.minimumAppendSize = minimumAppendSize
        self.maximumAge = maximumAge
    }

    /// The limits of a field value, or `nil` when it is not a Dictionary or a known key has a
    /// value that is not a non-negative Integer.
    init?(fieldValue: String) {
        guard let members = StructuredField.dictionary(fieldValue) else { return nil }
        self.init()
        for (key, value) in members {
            let keyPath: WritableKeyPath<UploadLimits, Int64?>
            switch key {
            case "max-size": keyPath = \.maximumSize
            case "min-size": keyPath = \.minimumSize
            case "max-append-size": keyPath = \.maximumAppendSize
            case "min-append-size": keyPath = \.minimumAppendSize
            case "max-age", "expires": keyPath = \.maximumAge
            default: continue
            }
            guard case .integer(let number) = value, number >= 0 else { return nil }
            self[keyPath: keyPath] = number
        }
    }
}

/// The few Structured Field forms (RFC 9651) the upload fields use, parsed strictly.
enum StructuredField {
    /// A bare item of a Dictionary member, as far as Ferry tells them apart.
    enum Item: Sendable, Equatable {
        case integer(Int64)
        case boolean(Bool)
        /// A decimal, string, token or byte sequence: never what an upload field wants.
        case other
    }

    /// An Item field that is a non-negative Integer (at most 15 digits); parameters are dropped.
    static func nonNegativeInteger(_ value: String) -> Int64? {
        var scanner = Scanner(value)
        scanner.skipSpaces()
        guard case .integer(let number)? = scanner.bareItem(), number >= 0, scanner.skipParameters() else {
            return nil
        }
        scanner.skipSpaces()
        return scanner.atEnd ? number : nil
    }

    /// An Item field that is a Boolean (`?0` or `?1`); parameters are dropped.
    static func boolean(_ value: String) -> Bool? {
        var scanner = Scanner(value)
        scanner.skipSpaces()
        guard case .boolean(let flag)? = scanner.bareItem(), scanner.skipParameters() else { return nil }
        scanner.skipSpaces()
        return scanner.atEnd ? flag : nil
    }

    /// A Dictionary field's members in order (a later duplicate key wins, as RFC 9651 says),
    /// their parameters dropped; `nil` when the value is not a Dictionary of bare items.
    static func dictionary(_ value: String) -> [(String, Item)]? {
        var scanner = Scanner(value)
        var members: [(String, Item)] = []
        scanner.skipSpaces()
        if scanner.atEnd { return members }
        while true {
            guard let key = scanner.key() else { return nil }
            let item: Item
            if scanner.take(UInt8(ascii: "=")) {
                guard let bare = scanner.bareItem() else { return nil }
                item = bare
            } else {
                item = .boolean(true)
            }
            guard scanner.skipParameters() else { return nil }
            members.removeAll { $0.0 == key }
            members.append((key, item))
            scanner.skipBlanks()
            if scanner.atEnd { return members }
            guard scanner.take(UInt8(ascii: ",")) else { return nil }
            scanner.skipBlanks()
            if scanner.atEnd { return nil }
        }
    }

    /// Reads a field value byte by byte.
    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ value: String) { bytes = Array(value.utf8) }

        var atEnd: Bool { position == bytes.count }
        var current: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func skipSpaces() { while current == 0x20 { position += 1 } }
        mutating func skipBlanks() { while current == 0x20 || current == 0x09 { position += 1 } }

        mutating func take(_ byte: UInt8) -> Bool {
            guard current == byte else { return false }
            position += 1
            return true
        }

        /// A key: `lcalpha / "*"` then `lcalpha / DIGIT / "_" / "-" / "." / "*"`.
        mutating func key() -> String? {
            guard let first = current, first == 0x2A || (0x61...0x7A).contains(first) else { return nil }
            let start = position
            while let byte = current,
                (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) || byte == 0x5F || byte == 0x2D
                    || byte == 0x2E || byte == 0x2A
            {
                position += 1
            }
            return String(decoding: bytes[start..<position], as: UTF8.self)
        }

        /// A bare item: an Integer or Boolean read exactly, anything else skipped as `.other`.
        mutating func bareItem() -> Item? {
            guard let first = current else { return nil }
            if first == UInt8(ascii: "?") {
                position += 1
                guard let flag = current, flag == 0x30 || flag == 0x31 else { return nil }
                position += 1
                return .boolean(flag == 0x31)
            }
            if first == UInt8(ascii: "-") || (0x30...0x39).contains(first) { return number() }
            if first == UInt8(ascii: "\"") { return string() }
            if first == UInt8(ascii: ":") { return byteSequence() }
            if first == UInt8(ascii: "*") || (0x41...0x5A).contains(first) || (0x61...0x7A).contains(first) {
                return token()
            }
            return nil
        }

        private mutating func number() -> Item? {
            let negative = take(UInt8(ascii: "-"))
            var digits = 0
            var value: Int64 = 0
            var decimal = false
            while let byte = current {
                if (0x30...0x39).contains(byte) {
                    digits += 1
                    guard digits <= (decimal ? 16 : 15) else { return nil }
                    if !decimal { value = value * 10 + Int64(byte - 0x30) }
                } else if byte == UInt8(ascii: "."), !decimal, digits > 0, digits <= 12 {
                    decimal = true
                } else {
                    break
                }
                position += 1
            }
            guard digits > 0, bytes[position - 1] != UInt8(ascii: ".") else { return nil }
            return decimal ? .other : .integer(negative ? -value : value)
        }

        private mutating func string() -> Item? {
            position += 1
            while let byte = current {
                position += 1
                if byte == UInt8(ascii: "\\") {
                    guard let escaped = current, escaped == 0x22 || escaped == 0x5C else { return nil }
                    position += 1
                } else if byte == 0x22 {
                    return .other
                } else if byte < 0x20 || byte > 0x7E {
                    return nil
                }
            }
            return nil
        }

        private mutating func byteSequence() -> Item? {
            position += 1
            while let byte = current {
                position += 1
                if byte == UInt8(ascii: ":") { return .other }
                let base64 =
                    (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                    || byte == 0x2B || byte == 0x2F || byte == 0x3D
                guard base64 else { return nil }
            }
            return nil
        }

        private mutating func token() -> Item? {
            position += 1
            while let byte = current, byte > 0x20, byte < 0x7F,
                !Self.delimiters.contains(byte) || byte == 0x3A
                    || byte == 0x2F
            {
                position += 1
            }
            return .other
        }

        private static let delimiters: Set<UInt8> = Set("\"(),;<=>?@[\\]{}".utf8)

        /// Parameters after an item: `;key[=item]`, dropped. `false` when malformed.
        mutating func skipParameters() -> Bool {
            while take(UInt8(ascii: ";")) {
                skipSpaces()
                guard key() != nil else { return false }
                if take(UInt8(ascii: "=")), bareItem() == nil { return false }
            }
            return true
        }
    }
}
