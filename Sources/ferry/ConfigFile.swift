import Ferry
import Foundation

/// curl's config files (`-K FILE`, `--config FILE`, and the default one) for `ferry get`,
/// `put` and `upload`: each line an option, turned into the arguments it stands for before
/// the command line is parsed.
///
/// A line is `NAME`, `NAME VALUE`, `NAME = VALUE` or `NAME: VALUE`; NAME is a long option
/// with or without its `--`, or a short one with its `-`; VALUE is a word, or a double-quoted
/// string with `\"`, `\\`, `\t`, `\n`, `\r`, `\v` escapes; `#` starts a comment line. `url`
/// gives a URL. Options of curl's that Ferry does anyway (`location`, `fail`, `show-error`)
/// are skipped, and a few are spelled as Ferry spells them (`silent`, `retry`,
/// `user-agent`).
///
/// Without `-q` (or `--disable`) as the first argument after the command, as curl's, the
/// default file is read first: `$XDG_CONFIG_HOME/ferry/config` (`~/.config/ferry/config`),
/// else `~/.ferryrc`. The command line comes after it, so its options win.
enum ConfigFile {
    /// The commands that read config files.
    static let commands: Set<String> = ["get", "put", "upload"]

    /// `arguments` (the command line without the program's name) with the default file's
    /// arguments put after the command, and each `-K FILE` replaced by the file's.
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` naming a file that cannot be read, a
    ///   line that cannot be parsed, or `-K` nested too deep.
    static func expand(
        _ arguments: [String],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(FerryError) -> [String] {
        guard let command = arguments.first, commands.contains(command) else { return arguments }
        var rest = Array(arguments.dropFirst())
        var expanded = [command]
        if rest.first == "-q" || rest.first == "--disable" {
            // curl's -q skips the default file; ferry's -q is also --quiet, which it stays.
            if rest.first == "--disable" { rest.removeFirst() }
        } else if let file = defaultFile(environment) {
            expanded += try Self.arguments(ofFileAt: file.path, depth: 0)
        }
        expanded += try replacingConfigOptions(rest, depth: 0)
        return expanded
    }

    /// The default config file, when one exists.
    static func defaultFile(_ environment: [String: String]) -> URL? {
        let home = URL(fileURLWithPath: environment["HOME"] ?? NSHomeDirectory(), isDirectory: true)
        let xdg = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
        let candidates = [
            (xdg ?? home.appendingPathComponent(".config")).appendingPathComponent("ferry/config"),
            home.appendingPathComponent(".ferryrc"),
        ]
        return candidates.first { FileManager.default.isReadableFile(atPath: $0.path) }
    }

    private static func replacingConfigOptions(_ arguments: [String], depth: Int) throws(FerryError) -> [String] {
        var result: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument == "--" {
                result += arguments[index...]
                break
            }
            var path: String?
            if argument == "-K" || argument == "--config" {
                guard index + 1 < arguments.count else {
                    throw FerryError(.invalidRequest, "\(argument) needs a file ('-': standard input).")
                }
                path = arguments[index + 1]
                index += 1
            } else if argument.hasPrefix("--config=") {
                path = String(argument.dropFirst("--config=".count))
            } else if argument.hasPrefix("-K"), argument.count > 2 {
                path = String(argument.dropFirst(2))
            }
            if let path {
                result += try self.arguments(ofFileAt: path, depth: depth + 1)
            } else {
                result.append(argument)
            }
            index += 1
        }
        return result
    }

    /// The arguments the file at `path` (`-`: standard input) stands for.
    static func arguments(ofFileAt path: String, depth: Int) throws(FerryError) -> [String] {
        guard depth <= 8 else { throw FerryError(.invalidRequest, "Config files include each other too deep.") }
        let data =
            path == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: path)
        guard let data else { throw FerryError(.invalidRequest, "Cannot read the config file '\(path)'.") }
        let lines = try parse(String(decoding: data, as: UTF8.self), name: path)
        return try replacingConfigOptions(lines, depth: depth)
    }

    /// The arguments of a config file's text.
    static func parse(_ text: String, name: String) throws(FerryError) -> [String] {
        var arguments: [String] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(rawLine).drop { $0 == " " || $0 == "\t" }
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.isEmpty || line.hasPrefix("#") { continue }
            let option = line.prefix { !($0 == " " || $0 == "\t" || $0 == "=" || $0 == ":") }
            var rest = line.dropFirst(option.count).drop { $0 == " " || $0 == "\t" }
            if rest.first == "=" || rest.first == ":" { rest = rest.dropFirst().drop { $0 == " " || $0 == "\t" } }
            let value: String?
            if rest.first == "\"" {
                guard let unquoted = unquote(rest.dropFirst()) else {
                    throw FerryError(.invalidRequest, "\(name) line \(index + 1): a quoted value does not end.")
                }
                value = unquoted
            } else {
                let word = rest.prefix { $0 != " " && $0 != "\t" }
                value = word.isEmpty ? nil : String(word)
            }
            arguments += translated(String(option), value)
        }
        return arguments
    }

    /// A quoted value's text (after its opening quote), or `nil` when it does not end.
    private static func unquote(_ text: Substring) -> String? {
        var result = ""
        var escaped = false
        for character in text {
            if escaped {
                switch character {
                case "t": result.append("\t")
                case "n": result.append("\n")
                case "r": result.append("\r")
                case "v": result.append("\u{0B}")
                default: result.append(character)
                }
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "\"" {
                return result
            } else {
                result.append(character)
            }
        }
        return nil
    }

    /// The ferry arguments for one config line.
    private static func translated(_ option: String, _ value: String?) -> [String] {
        let name = option.hasPrefix("-") ? option : "--" + option
        switch name {
        case "--url": return value.map { [$0] } ?? []
        // What Ferry always does.
        case "--location", "-L", "--fail", "-f", "--show-error", "-S": return []
        case "--silent", "-s": return ["--quiet"]
        case "--retry": return ["--retries"] + (value.map { [$0] } ?? [])
        case "--user-agent", "-A": return ["-H", "User-Agent: \(value ?? "")"]
        default: return [name] + (value.map { [$0] } ?? [])
        }
    }
}
