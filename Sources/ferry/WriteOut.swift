import Ferry
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// curl's `-w` / `--write-out FORMAT`: text printed once the transfer has ended, with
/// `%{variable}`s replaced by what the transfer did, written as curl 7.88 writes them.
///
/// FORMAT is curl's: `@FILE` reads it from a file (`@-` from standard input); `\n`, `\r`,
/// `\t` and `\\` are escapes; `%%` is a `%`; `%{name}` a variable; `%header{name}` a field of
/// the final response; `%{stdout}` and `%{stderr}` choose where what follows goes (standard
/// output at first). An unknown variable is said on standard error and prints nothing.
struct WriteOut {
    /// One piece of the format.
    enum Piece: Equatable {
        case text(String)
        case variable(String)
        case header(String)
        case toStandardOutput
        case toStandardError
    }

    let pieces: [Piece]

    /// Parses `format` (after reading it from a file, for `@FILE`).
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` when `@FILE` cannot be read.
    init(_ format: String) throws(FerryError) {
        var text = format
        if format.hasPrefix("@") {
            let path = String(format.dropFirst())
            let data =
                path == "-"
                ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: path)
            guard let data else {
                throw FerryError(.invalidRequest, "Cannot read the --write-out format from '\(path)'.")
            }
            text = String(decoding: data, as: UTF8.self)
        }
        pieces = Self.parse(text)
    }

    /// The pieces of `format`, as curl's writeout reads it.
    static func parse(_ format: String) -> [Piece] {
        var pieces: [Piece] = []
        var literal = ""
        func flush() {
            if !literal.isEmpty { pieces.append(.text(literal)) }
            literal = ""
        }
        var rest = Substring(format)
        while let character = rest.first {
            rest = rest.dropFirst()
            switch character {
            case "\\":
                guard let next = rest.first else {
                    literal.append("\\")
                    continue
                }
                rest = rest.dropFirst()
                switch next {
                case "n": literal.append("\n")
                case "r": literal.append("\r")
                case "t": literal.append("\t")
                case "\\": literal.append("\\")
                default: literal.append("\\\(next)")
                }
            case "%":
                if rest.first == "%" {
                    rest = rest.dropFirst()
                    literal.append("%")
                } else if rest.hasPrefix("{"), let close = rest.firstIndex(of: "}") {
                    let name = String(rest[rest.index(after: rest.startIndex)..<close])
                    rest = rest[rest.index(after: close)...]
                    flush()
                    switch name {
                    case "stdout": pieces.append(.toStandardOutput)
                    case "stderr": pieces.append(.toStandardError)
                    default: pieces.append(.variable(name))
                    }
                } else if rest.hasPrefix("header{"), let close = rest.firstIndex(of: "}") {
                    let name = String(rest[rest.index(rest.startIndex, offsetBy: "header{".count)..<close])
                    rest = rest[rest.index(after: close)...]
                    flush()
                    pieces.append(.header(name))
                } else {
                    literal.append("%")
                }
            default:
                literal.append(character)
            }
        }
        flush()
        return pieces
    }

    /// Whether the format asks for what only a measured connection tells (addresses, connect
    /// and TLS times): the session then collects connection metrics.
    var needsConnectionMetrics: Bool {
        let measured: Set<String> = [
            "remote_ip", "remote_port", "local_ip", "local_port", "time_connect", "time_appconnect",
            "time_namelookup", "time_pretransfer", "num_connects", "json",
        ]
        return pieces.contains { if case .variable(let name) = $0 { measured.contains(name) } else { false } }
    }

    /// Writes the format for `report`.
    func write(_ report: Report) {
        var toStandardError = false
        var out = ""
        var err = ""
        for piece in pieces {
            var text = ""
            switch piece {
            case .text(let literal): text = literal
            case .toStandardOutput: toStandardError = false
            case .toStandardError: toStandardError = true
            case .header(let name): text = report.response?.headers[name] ?? ""
            case .variable("json"): text = report.json
            case .variable(let name):
                guard let value = report.values[name] else {
                    FileHandle.standardError.write(Data("ferry: unknown --write-out variable: '\(name)'\n".utf8))
                    continue
                }
                text = value.text
            }
            if toStandardError { err += text } else { out += text }
        }
        if !out.isEmpty { FileHandle.standardOutput.write(Data(out.utf8)) }
        if !err.isEmpty { FileHandle.standardError.write(Data(err.utf8)) }
    }

    /// A variable's value: text, a whole number, a status (three digits as text, a number in
    /// JSON) or seconds (printed with six decimals).
    enum Value: Equatable {
        case text(String?)
        case number(Int64)
        case status(Int)
        case seconds(Double)

        var text: String {
            switch self {
            case .text(let text): text ?? ""
            case .number(let number): "\(number)"
            case .status(let status): String(format: "%03d", status)
            case .seconds(let seconds): String(format: "%.6f", seconds)
            }
        }

        var json: String {
            switch self {
            case .text(nil): return "null"
            case .text(let text?):
                let encoder = JSONEncoder()
                encoder.outputFormatting = .withoutEscapingSlashes
                let encoded = try? encoder.encode(text)
                return encoded.map { String(decoding: $0, as: UTF8.self) } ?? "null"
            case .status(let status): return "\(status)"
            case .number, .seconds: return text
            }
        }
    }

    /// What the transfer did, as curl's variables name it.
    struct Report {
        var values: [String: Value]
        var response: HTTPResponse?

        /// `%{json}`: every variable, keys sorted, as curl prints it.
        var json: String {
            "{" + values.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value.json)" }.joined(separator: ",")
                + "}"
        }

        /// The report of `task`, started for `given`, that ended with `exitCode` and `error`
        /// and wrote to `filename` (`nil`: standard output).
        init(task: SessionTask, given: String, exitCode: Int32, error: FerryError?, filename: String?) {
            let metrics = task.metrics
            let transactions = metrics?.transactions ?? []
            let response = task.response ?? transactions.last(where: { $0.response != nil })?.response
            self.response = response
            // The final request: the last one that was not answered by a redirect.
            let finalIndex = transactions.lastIndex { !(300...399).contains($0.response?.statusCode ?? 0) }
            let last = finalIndex.map { transactions[$0] }
            let afterRedirects =
                finalIndex.map { index in
                    transactions[index...].filter { !(300...399).contains($0.response?.statusCode ?? 0) }
                } ?? []
            let start = metrics?.taskInterval.start ?? Date()
            let total = metrics?.taskInterval.duration ?? 0
            let downloaded = afterRedirects.reduce(Int64(0)) { $0 + $1.countOfResponseBodyBytesReceived }
            func since(_ date: Date?) -> Value { .seconds(date.map { max(0, $0.timeIntervalSince(start)) } ?? 0) }
            let first = transactions.first
            let status = response?.statusCode ?? 0
            let redirects = metrics?.redirectCount ?? 0
            let scheme = (response?.url ?? task.originalRequest.url)?.scheme?.uppercased()
            // curl's: 1, 1.1, 2, 3.
            let version = response?.shortVersion
            // curl counts the heads of every response, redirects' included: "VERSION CODE
            // REASON\r\n", each "Name: value\r\n", then "\r\n".
            let heads = transactions.compactMap(\.response)
            let headerBytes = (heads.isEmpty ? response.map { [$0] } ?? [] : heads).reduce(0) { total, head in
                head.headers.reduce(total + head.httpVersion.utf8.count + head.reasonPhrase.utf8.count + 9) {
                    $0 + $1.name.utf8.count + $1.value.utf8.count + 4
                }
            }
            let connected = transactions.last { $0.remoteAddress != nil }
            let finalURL = response?.url ?? task.currentRequest.url
            let port = finalURL.map { $0.port ?? ($0.scheme?.lowercased() == "https" ? 443 : 80) }
            values = [
                "content_type": .text(response?.headers["Content-Type"]),
                "errormsg": .text(error?.description),
                "exitcode": .number(Int64(exitCode)),
                "filename_effective": .text(filename),
                "http_code": .status(status),
                "http_version": .text(version ?? "0"),
                "method": .text(task.originalRequest.httpMethod ?? "GET"),
                "num_connects": .number(Int64(transactions.filter { $0.connectStartDate != nil }.count)),
                "num_headers": .number(Int64(response.map { Array($0.headers).count } ?? 0)),
                "num_redirects": .number(Int64(redirects)),
                "remote_ip": .text(connected?.remoteAddress ?? ""),
                // The address is the one connected to; its port, the URL's (without a proxy).
                "remote_port": .number(connected == nil ? 0 : Int64(port ?? 0)),
                "response_code": .status(status),
                "scheme": .text(scheme),
                "size_download": .number(downloaded),
                "size_header": .number(Int64(headerBytes)),
                "size_upload": .number(transactions.reduce(Int64(0)) { $0 + $1.countOfRequestBodyBytesSent }),
                "speed_download": .number(total > 0 ? Int64(Double(downloaded) / total) : 0),
                "time_appconnect": since(first?.secureConnectionEndDate),
                "time_connect": since(first?.connectEndDate),
                // Ferry does not time the name lookup apart: it ends when connecting starts.
                "time_namelookup": since(first?.connectStartDate),
                "time_pretransfer": since(last?.requestStartDate),
                "time_redirect": redirects > 0 ? since(last?.fetchStartDate) : .seconds(0),
                "time_starttransfer": since(last?.responseStartDate),
                "time_total": .seconds(total),
                "url": .text(given),
                "url_effective": .text(finalURL?.absoluteString ?? given),
            ]
        }
    }
}
