import Ferry
import Foundation

/// One `-F` argument in curl's syntax: `name=value`, `name=@path[;type=mime][;filename=name]`
/// (a file part), or `name=<path` (a text field read from a file). A value may be quoted
/// (`name="a;b"`) to hold semicolons.
struct FormArgument: Equatable {
    enum Kind: Equatable {
        case text(String)
        case file(path: String, type: String?, fileName: String?)
        case textFromFile(path: String)
    }

    var name: String
    var kind: Kind

    init(parsing argument: String) throws(FerryError) {
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
            throw FerryError(.invalidRequest, "'\(argument)' is not NAME=VALUE, NAME=@FILE or NAME=<FILE.")
        }
        name = String(argument[..<equals])
        let rest = String(argument[argument.index(after: equals)...])
        if rest.hasPrefix("@") || rest.hasPrefix("<") {
            let segments = Self.split(String(rest.dropFirst()))
            guard let path = segments.first, !path.isEmpty else {
                throw FerryError(.invalidRequest, "'\(argument)' names no file.")
            }
            if rest.hasPrefix("<") {
                kind = .textFromFile(path: path)
                return
            }
            var type: String?
            var fileName: String?
            for option in segments.dropFirst() {
                let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
                guard pair.count == 2 else {
                    throw FerryError(.invalidRequest, "'\(option)' in '\(argument)' is not KEY=VALUE.")
                }
                switch pair[0].lowercased() {
                case "type": type = pair[1]
                case "filename": fileName = Self.unquote(pair[1])
                default:
                    throw FerryError(
                        .invalidRequest,
                        "Unknown option '\(pair[0])' in '\(argument)' (type= or filename=)."
                    )
                }
            }
            kind = .file(path: path, type: type, fileName: fileName)
        } else {
            kind = .text(Self.unquote(Self.split(rest).first ?? ""))
        }
    }

    /// Splits at semicolons outside double quotes.
    static func split(_ text: String) -> [String] {
        var segments: [String] = []
        var current = ""
        var quoted = false
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" && quoted {
                current.append(character)
                escaped = true
            } else if character == "\"" {
                quoted.toggle()
                current.append(character)
            } else if character == ";" && !quoted {
                segments.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        segments.append(current)
        return segments
    }

    static func unquote(_ text: String) -> String {
        guard text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") else { return text }
        var result = ""
        var escaped = false
        for character in text.dropFirst().dropLast() {
            if escaped {
                result.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                result.append(character)
            }
        }
        return result
    }

    /// Adds this argument to `form`.
    func add(to form: inout MultipartFormData) throws(FerryError) {
        switch kind {
        case .text(let value):
            form.append(value, name: name)
        case .textFromFile(let path):
            guard let data = FileManager.default.contents(atPath: path) else {
                throw FerryError(.uploadBodyFailed, "Cannot read '\(path)'.")
            }
            form.append(String(decoding: data, as: UTF8.self), name: name)
        case .file(let path, let type, let fileName):
            try form.append(fileURL: URL(fileURLWithPath: path), name: name, fileName: fileName, mimeType: type)
        }
    }
}
