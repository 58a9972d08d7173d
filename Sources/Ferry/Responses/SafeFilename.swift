/// Turns a name chosen by a server into one that is safe to create in a directory.
///
/// A name from `Content-Disposition` or a URL is hostile input: it may hold `/`, `..`,
/// control characters, or be thousands of bytes long. ``sanitize(_:fallback:)`` keeps only its
/// last path component, removes control and separator characters, refuses `.` and `..` and
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
        // Keep the last component, whichever separator the server used.
        let lastComponent =
            name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(
            String.UnicodeScalarView(
                lastComponent.unicodeScalars.filter { scalar in
                    !(scalar.value < 0x20 || scalar.value == 0x7F
                        || (0x80...0x9F).contains(scalar.value)
                        || scalar == "\u{2028}" || scalar == "\u{2029}"
                        || scalar == "\u{202E}" || scalar == "\u{202D}")
                }
            )
        )
        cleaned = cleaned.trimmingWhitespace()
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        cleaned = cleaned.trimmingWhitespace()
        if cleaned.isEmpty { return fallback }
        return bounded(cleaned)
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
