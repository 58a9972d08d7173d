import Foundation

/// Which domains are public suffixes (`com`, `co.uk`, `github.io`): names under which
/// anyone may register, so a cookie for one would be sent to every site beneath it.
///
/// Read from the system's copy of the Public Suffix List (Debian's `publicsuffix` package,
/// `/usr/share/publicsuffix/public_suffix_list.dat`), with its normal, wildcard (`*.ck`) and
/// exception (`!www.ck`) rules. Without it, ``fallback`` treats every top-level name, and a
/// common second-level name (`co`, `com`, `org`, `ac`, …) under a two-letter country code,
/// as a suffix. Names are compared as the URL gives them (international names in their
/// `xn--` form, so the list's Unicode rules do not match them).
struct PublicSuffixList: Sendable {
    private let rules: Set<String>
    private let wildcards: Set<String>
    private let exceptions: Set<String>
    private let isFallback: Bool

    /// Where Debian (and most distributions) keep the list.
    static let systemPaths = [
        "/usr/share/publicsuffix/public_suffix_list.dat",
        "/usr/share/publicsuffix/effective_tld_names.dat",
    ]

    /// The system's list, when it has one.
    static let system: PublicSuffixList? = {
        for path in systemPaths {
            if let text = try? String(contentsOfFile: path, encoding: .utf8) { return PublicSuffixList(rules: text) }
        }
        return nil
    }()

    /// Rules for a system without the list.
    static let fallback = PublicSuffixList()

    /// The system's list, else ``fallback``.
    static var current: PublicSuffixList { system ?? fallback }

    /// A list in the Public Suffix List's format: one rule a line, `//` comments.
    init(rules text: String) {
        var rules = Set<String>()
        var wildcards = Set<String>()
        var exceptions = Set<String>()
        for line in text.split(whereSeparator: \.isNewline) {
            guard let rule = line.split(whereSeparator: \.isWhitespace).first, !rule.hasPrefix("//") else { continue }
            let lower = rule.lowercased()
            if lower.hasPrefix("!") {
                exceptions.insert(String(lower.dropFirst()))
            } else if lower.hasPrefix("*.") {
                wildcards.insert(String(lower.dropFirst(2)))
            } else {
                rules.insert(lower)
            }
        }
        self.rules = rules
        self.wildcards = wildcards
        self.exceptions = exceptions
        isFallback = false
    }

    private init() {
        rules = []
        wildcards = []
        exceptions = []
        isFallback = true
    }

    private static let commonSecondLevel: Set<String> = [
        "ac", "co", "com", "edu", "gov", "go", "mil", "ne", "net", "or", "org", "gob", "nic", "ltd", "plc",
    ]

    /// Whether `domain` is itself a public suffix.
    func isPublicSuffix(_ domain: String) -> Bool {
        var name = domain.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !labels.isEmpty, !labels.contains(where: \.isEmpty) else { return false }
        if isFallback {
            return labels.count == 1
                || (labels.count == 2 && labels[1].count == 2 && Self.commonSecondLevel.contains(labels[0]))
        }
        return publicSuffixLabelCount(labels) == labels.count
    }

    /// How many labels, from the right, form the public suffix of `labels`: the longest
    /// matching rule, an exception before anything else, one label when nothing matches.
    private func publicSuffixLabelCount(_ labels: [String]) -> Int {
        for start in labels.indices {
            let candidate = labels[start...].joined(separator: ".")
            if exceptions.contains(candidate) { return labels.count - start - 1 }
            if rules.contains(candidate) { return labels.count - start }
            if start + 1 < labels.count, wildcards.contains(labels[(start + 1)...].joined(separator: ".")) {
                return labels.count - start
            }
        }
        return 1
    }
}
