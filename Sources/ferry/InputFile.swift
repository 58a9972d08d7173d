import Ferry
import Foundation

/// One download of a command that fetches several: its sources (mirrors of one file, tried
/// in order), where it goes, and what it brings of its own.
struct DownloadJob: Equatable, Sendable {
    /// The file's URLs: the first, then the others if one fails (each continues the bytes
    /// kept only when it serves the same version: Range with If-Range).
    var urls: [String]
    /// The output's name in ``directory`` (aria2's `out=`); `nil`: the server's (as `-O`).
    var output: String?
    /// The directory it goes into (aria2's `dir=`); `nil`: the command's (`--dir`, or the
    /// current one).
    var directory: String?
    /// The file's expected digest, `ALGORITHM=HEX` as `--checksum` takes it.
    var checksum: String?
    /// Request header fields of its own, `Name: value`, after the command's.
    var headers: [String] = []
    /// Connections for it (aria2's `split=`); `nil`: the command's `-s`.
    var split: Int?
}

/// aria2c's input file (`-i FILE`): each download is a line of URLs, separated by TABs when
/// they are mirrors of one file, followed by option lines that start with a space or a TAB
/// (`out=`, `dir=`, `checksum=sha-256=HEX`, `header=Name: value`, `split=N`); `#` starts a
/// comment line, empty lines are skipped.
enum InputFile {
    /// The jobs of `text`.
    ///
    /// - Throws: ``FerryError/Reason/invalidRequest`` naming the line, for an option line
    ///   before any URL, an option Ferry does not know, or a value it cannot use.
    static func jobs(in text: String) throws(FerryError) -> [DownloadJob] {
        var jobs: [DownloadJob] = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.allSatisfy(\.isWhitespace) || line.hasPrefix("#") { continue }
            guard let first = line.first, first == " " || first == "\t" else {
                let urls = line.split(separator: "\t").map { $0.trimmingCharacters(in: .whitespaces) }
                jobs.append(DownloadJob(urls: urls.filter { !$0.isEmpty }))
                continue
            }
            guard !jobs.isEmpty else {
                throw FerryError(.invalidRequest, "Input file line \(number): an option line before any URL.")
            }
            let option = line.trimmingCharacters(in: .whitespaces)
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else {
                throw FerryError(.invalidRequest, "Input file line \(number): '\(option)' is not NAME=VALUE.")
            }
            try apply(name: parts[0], value: parts[1], line: number, to: &jobs[jobs.count - 1])
        }
        return jobs
    }

    private static func apply(name: String, value: String, line: Int, to job: inout DownloadJob) throws(FerryError) {
        switch name {
        case "out":
            // A name in the job's directory: aria2 takes a relative path; Ferry keeps it to one
            // component, so that a list can never write outside the directory it names.
            guard !value.isEmpty, !value.contains("/"), value != ".", value != ".." else {
                throw FerryError(.invalidRequest, "Input file line \(line): out= takes a file name, not '\(value)'.")
            }
            job.output = value
        case "dir":
            job.directory = value
        case "checksum":
            // aria2's TYPE=DIGEST, TYPE one of sha-1, sha-224, sha-256, sha-384, sha-512, md5.
            let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
            let algorithm = parts.first.map { $0.lowercased().replacingOccurrences(of: "-", with: "") } ?? ""
            guard parts.count == 2, (try? Checksum(parsing: "\(algorithm)=\(parts[1])")) != nil else {
                throw FerryError(
                    .invalidRequest,
                    "Input file line \(line): checksum= takes TYPE=DIGEST, not '\(value)'."
                )
            }
            job.checksum = "\(algorithm)=\(parts[1])"
        case "header":
            job.headers.append(value)
        case "split":
            guard let count = Int(value), (1...64).contains(count) else {
                throw FerryError(.invalidRequest, "Input file line \(line): split= takes 1 to 64, not '\(value)'.")
            }
            job.split = count
        default:
            throw FerryError(
                .invalidRequest,
                "Input file line \(line): '\(name)' is not an option Ferry reads (out, dir, checksum, header, split)."
            )
        }
    }
}
