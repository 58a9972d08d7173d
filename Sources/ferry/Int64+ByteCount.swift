extension Int64 {
    /// A byte count as curl writes it: digits, then optionally k, M or G (powers of 1024).
    ///
    /// `nil` for anything else: an empty or negative count, another unit, or a count that
    /// does not fit.
    ///
    /// ```swift
    /// Int64(byteCount: "20M")  // 20_971_520
    /// ```
    init?(byteCount text: String) {
        let units: [Character: Int64] = [
            "k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20, "g": 1 << 30, "G": 1 << 30,
        ]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let multiplier = units[last] {
            unit = multiplier
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let value = Int64(digits), value >= 0 else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: unit)
        if overflow { return nil }
        self = product
    }
}
