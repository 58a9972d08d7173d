import ArgumentParser

/// How much `ferry get` says on standard error: `-q` (no progress line, no notes),
/// curl's `--silent` (that, and no error message either: the exit status says it) and
/// `-S` / `--show-error` (the error message even so, as `curl -sS`).
///
/// `-s` stays aria2c's number of segments; ``SplitHint`` answers `-s` typed by curl's hand.
struct NoiseOptions: ParsableArguments {
    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "No progress line.")
    var quietFlag = false

    @Flag(
        name: .customLong("silent"),
        help: "No progress line and no error message, as curl -s (ferry's -s is the number of segments)."
    )
    var silent = false

    @Flag(name: [.customShort("S"), .customLong("show-error")], help: "With --silent, the error message still shown.")
    var showError = false

    /// No progress line and no notes.
    var quiet: Bool { quietFlag || silent }

    /// No error message either.
    var hidesErrors: Bool { silent && !showError }
}

/// The answer to `-s` without a number, as curl's users type it (`ferry get -s -o f URL`,
/// `-sS`): ArgumentParser's own would be "Missing value for '-s <split>'".
enum SplitHint {
    /// The commands whose `-s` is the number of segments.
    static let commands: Set<String> = ["get", "add"]

    /// The message for `arguments` (the command line without the program's name), or `nil`
    /// when every `-s` in it has its number.
    static func message(for arguments: [String]) -> String? {
        guard let command = arguments.first, commands.contains(command) else { return nil }
        var index = 1
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" { return nil }
            if argument == "-s" {
                let next = index + 1 < arguments.count ? arguments[index + 1] : ""
                if Int(next) == nil { return text }
                index += 2
                continue
            }
            // A group of short flags with s in it (-sS, -sSL): curl's silent.
            if argument.count > 2, argument.hasPrefix("-"), !argument.hasPrefix("--"),
                argument.dropFirst().allSatisfy(\.isLetter), argument.contains("s")
            {
                return text
            }
            index += 1
        }
        return nil
    }

    static let text =
        "-s needs a number: did you mean --silent? (-s is the number of segments here, as in aria2c; -S is --show-error)"
}
