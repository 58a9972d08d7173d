public import Foundation

/// A `.netrc` file: login names and passwords per host, as curl (`-n`, `--netrc-file`),
/// wget and ftp read them.
///
/// Tokens are separated by white space: `machine NAME` starts an entry for one host,
/// `default` one for every other host; `login` and `password` (and `account`, ignored) take
/// the next token as their value. `macdef NAME` starts a macro that runs to the next blank
/// line and is skipped. A value may be written in double quotes, with `\"` and `\\` inside.
///
/// ```swift
/// let netrc = try Netrc(contentsOf: home.appendingPathComponent(".netrc"))
/// configuration.credential = netrc.credential(forHost: "api.example.com")
/// ```
public struct Netrc: Sendable, Equatable {
    /// One entry: `host` is `nil` for `default`.
    public struct Entry: Sendable, Equatable {
        /// The `machine`, or `nil` for the `default` entry.
        public var host: String?
        /// The `login`, when the entry has one.
        public var login: String?
        /// The `password`, when the entry has one.
        public var password: String?
    }

    /// The entries, in the file's order (the first matching `machine` wins).
    public private(set) var entries: [Entry]

    /// Parses the text of a `.netrc` file.
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` when a keyword lacks its value or a
    ///   quoted value is not closed.
    public init(parsing text: String) throws(FerryError) {
        var tokens = Tokens(text)
        var entries: [Entry] = []
        while let token = try tokens.next() {
            switch token {
            case "machine":
                guard let host = try tokens.next() else { throw Self.missing("machine") }
                entries.append(Entry(host: host.lowercased()))
            case "default":
                entries.append(Entry(host: nil))
            case "login", "password", "account":
                guard let value = try tokens.next() else { throw Self.missing(token) }
                guard !entries.isEmpty else { continue }
                if token == "login" { entries[entries.count - 1].login = value }
                if token == "password" { entries[entries.count - 1].password = value }
            case "macdef":
                _ = try tokens.next()
                tokens.skipToBlankLine()
            default:
                // Unknown tokens are skipped, as curl and ftp do.
                continue
            }
        }
        self.entries = entries
    }

    /// Reads and parses `file`.
    ///
    /// A file that the group or others may read is refused: it holds passwords, and curl
    /// warns about the same thing.
    ///
    /// - Throws: ``FerryError/Reason/fileSystem`` when the file cannot be read or is open to
    ///   others; ``FerryError/Reason/invalidRequest`` when it does not parse.
    public init(contentsOf file: URL) throws(FerryError) {
        var info = stat()
        guard stat(file.path, &info) == 0 else {
            throw FerryError(.fileSystem, "Cannot read '\(file.path)': \(String(cString: strerror(errno))).")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw FerryError(
                .fileSystem,
                "'\(file.path)' holds passwords but others may read it: run 'chmod 600 \(file.path)'."
            )
        }
        let text: String
        do {
            text = try String(contentsOf: file, encoding: .utf8)
        } catch {
            throw FerryError(.fileSystem, "Cannot read '\(file.path)'.", underlying: error)
        }
        try self.init(parsing: text)
    }

    /// The credential for `host`: its `machine` entry, else the `default` one; `nil` when
    /// neither names a login.
    public func credential(forHost host: String) -> Credential? {
        let host = host.lowercased()
        let entry = entries.first { $0.host == host } ?? entries.first { $0.host == nil }
        guard let entry, let login = entry.login else { return nil }
        return Credential(user: login, password: entry.password ?? "")
    }

    private static func missing(_ keyword: String) -> FerryError {
        FerryError(.invalidRequest, "The .netrc file ends after '\(keyword)', which needs a value.")
    }

    /// The file's tokens, in order.
    private struct Tokens {
        private let characters: [Character]
        private var index = 0

        init(_ text: String) { characters = Array(text) }

        mutating func next() throws(FerryError) -> String? {
            while index < characters.count, characters[index].isWhitespace { index += 1 }
            guard index < characters.count else { return nil }
            if characters[index] == "\"" {
                index += 1
                var value = ""
                while index < characters.count {
                    let character = characters[index]
                    index += 1
                    if character == "\"" { return value }
                    if character == "\\", index < characters.count {
                        value.append(characters[index])
                        index += 1
                    } else {
                        value.append(character)
                    }
                }
                throw FerryError(.invalidRequest, "The .netrc file has a quoted value that is not closed.")
            }
            let start = index
            while index < characters.count, !characters[index].isWhitespace { index += 1 }
            return String(characters[start..<index])
        }

        /// Skips a macro's body: everything up to the next blank line.
        mutating func skipToBlankLine() {
            var previousWasNewline = false
            while index < characters.count {
                let character = characters[index]
                index += 1
                if character.isNewline {
                    if previousWasNewline { return }
                    previousWasNewline = true
                } else {
                    previousWasNewline = false
                }
            }
        }
    }
}
