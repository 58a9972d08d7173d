/// A `Range` header (RFC 9110 §14.2) resolved against a representation of known length.
public enum ByteRangeRequest: Equatable, Sendable {
    /// No usable `Range`: send the whole representation with 200 (a syntax the server does
    /// not understand, or more than one range, is ignored as §14.2 allows).
    case full
    /// One satisfiable range: send it with 206.
    case partial(Range<Int64>)
    /// No range overlaps the representation: answer 416 with `Content-Range: bytes */size`.
    case unsatisfiable

    /// Resolves `header` for a representation of `size` bytes.
    public init(header: String?, size: Int64) {
        guard let header = header?.trimmingCharacters(in: .whitespaces) else {
            self = .full
            return
        }
        let lower = header.lowercased()
        guard lower.hasPrefix("bytes=") else {
            self = .full
            return
        }
        let specs = header.dropFirst("bytes=".count).split(separator: ",").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        guard specs.count == 1, let spec = specs.first, let dash = spec.firstIndex(of: "-") else {
            self = .full
            return
        }
        let first = spec[..<dash]
        let last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            // Suffix range: the last N bytes.
            guard let suffix = Int64(last), suffix >= 0, last.allSatisfy(\.isNumber) else {
                self = .full
                return
            }
            guard suffix > 0, size > 0 else {
                self = .unsatisfiable
                return
            }
            self = .partial(max(0, size - suffix)..<size)
            return
        }
        guard let start = Int64(first), first.allSatisfy(\.isNumber) else {
            self = .full
            return
        }
        var end = size - 1
        if !last.isEmpty {
            guard let value = Int64(last), last.allSatisfy(\.isNumber), value >= start else {
                self = .full
                return
            }
            end = min(value, size - 1)
        }
        guard start < size else {
            self = .unsatisfiable
            return
        }
        self = .partial(start..<(end + 1))
    }
}
