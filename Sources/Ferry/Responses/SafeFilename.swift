/// Turns a name chosen by a server into one that is safe to create in a directory.
///
/// A name from `Content-Disposition` or a URL is hostile input: it may hold `/`, `..`,
/// control characters, or be thousands of bytes long. ``sanitize(_:fallback:)`` keeps only its
/// last path component, removes control, separator, bidirectional and zero-width characters,
/// refuses `.` and `..` and
/// leading dots (no hidden files), and bounds the UTF-8 length to 255 bytes, keeping the
/// extension where it can.
public enum SafeFilename {
    /// The largest name most Linux file systems accept, in UTF-8 bytes.
    public static let maximumLength = 255

    /// Reduces `name` to a safe base name.
    ///
    /// ```swift
    /// SafeFilename.sanitize("../../etc/passwd")   // "passwd"
    /// SafeFilename.sanitize("..")                 // "download"
    /// ```
    /// - Parameters:
    ///   - name: The untrusted name.
    ///   - fallback: What to return when nothing safe is left.
    /// - Returns: A non-empty name with no path separator, or `fallback`.
    public static func sanitize(_ name: String, fallback: String = "download") -> String {
        isPlain(name) ? name : cleaned(name, fallback: fallback)
    }

    /// ``sanitize(_:fallback:)``'s steps, each made.
    static func cleaned(_ name: String, fallback: String) -> String {
        // Keep the last component, whichever separator the server used.
        let lastComponent =
            name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(
            String.UnicodeScalarView(
                lastComponent.unicodeScalars.filter { !isHidden($0) }
            )
        )
        cleaned = cleaned.trimmingWhitespace()
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        cleaned = cleaned.trimmingWhitespace()
        if cleaned.isEmpty { return fallback }
        return bounded(cleaned)
    }

    /// Whether every step of ``sanitize(_:fallback:)`` leaves `name` as it is: printable
    /// ASCII without a space or a separator, not starting with a dot, within
    /// ``maximumLength`` bytes. Most names are, and are returned without a copy.
    static func isPlain(_ name: String) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, first != UInt8(ascii: "."), bytes.count <= maximumLength else { return false }
        return bytes.allSatisfy { byte in
            byte > 0x20 && byte < 0x7F && byte != UInt8(ascii: "/") && byte != UInt8(ascii: "\\")
        }
    }

    /// Characters that are invisible or reorder what is shown: controls, line and paragraph
    /// separators, the bidirectional controls (embeddings, overrides and isolates, which make
    /// `evil\u{202E}txt.exe` read as `evilexe.txt`), the directional marks, and zero-width
    /// characters and the byte order mark.
    static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F, 0x80...0x9F: true
        case 0x2028, 0x2029: true
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: true
        case 0x200B...0x200D, 0x2060, 0xFEFF, 0x180E: true
        default: false
        }
    }

    /// The name of a hidden file that accompanies `name` (`.NAME` then `suffix`), within
    /// ``maximumLength`` bytes: a long name is cut and marked with a hash of all of it, so
    /// side files of different long names stay different.
    static func sidecar(of name: String, suffix: String) -> String {
        let whole = "." + name + suffix
        guard whole.utf8.count > maximumLength else { return whole }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0100_0000_01b3
        }
        let mark = "~" + String(hash, radix: 16)
        var stem = Substring(name)
        while 1 + stem.utf8.count + mark.utf8.count + suffix.utf8.count > maximumLength { stem.removeLast() }
        return "." + stem + mark + suffix
    }

    private static func bounded(_ name: String) -> String {
        guard name.utf8.count > maximumLength else { return name }
        var stem = name
        var ext = ""
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let candidate = String(name[dot...])
            if candidate.utf8.count <= 16 {
                ext = candidate
                stem = String(name[..<dot])
            }
        }
        while stem.utf8.count + ext.utf8.count > maximumLength { stem.removeLast() }
        return stem + ext
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
