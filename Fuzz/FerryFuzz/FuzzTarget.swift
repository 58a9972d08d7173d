import Foundation
import NIOCore

@testable import Ferry

/// The parsers Ferry wrote by hand, each a fuzz target: what a server, a file or a user can
/// hand them is any bytes at all, and each must end (no hang), without a crash, with a
/// value or a typed error (their signatures say `throws(FerryError)` or return `nil`).
///
/// One binary serves every target; `FERRY_FUZZ_TARGET` names the one libFuzzer drives
/// (`Fuzz/run`), and the replay build (no sanitizer) runs each target's seed corpus in
/// `Fuzz/Corpus/<target>/`.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// The upgrade's and `CONNECT`'s response head, and its body framing.
    case responseHead = "response-head"
    case contentDisposition = "content-disposition"
    case setCookie = "set-cookie"
    /// A cookies.txt (Netscape) file.
    case cookiesTxt = "cookies-txt"
    case netrc
    /// `WWW-Authenticate` fields (one per line), and a Digest answer to each.
    case digestChallenge = "digest-challenge"
    case contentRange = "content-range"
    case resumeData = "resume-data"
    /// The resumable-upload fields of a response, one `Name: value` per line.
    case uploadFields = "upload-fields"
    case uploadResumeData = "upload-resume-data"

    /// A fixed clock, so one input always takes one path.
    private static let now = Date(timeIntervalSince1970: 1_780_000_000)

    /// Feeds `data` to the target's parser, and what it returns to what reads it next.
    func run(_ data: Data) {
        let text = String(decoding: data, as: UTF8.self)
        switch self {
        case .responseHead:
            // In two pieces, split where the first byte says, as a network hands them over.
            var parser = ResponseHeadParser(maximumSize: 16 * 1024)
            let split = data.isEmpty ? 0 : Int(data[data.startIndex]) % (data.count + 1)
            parser.append(ByteBuffer(bytes: data.prefix(split)))
            _ = try? parser.head()
            parser.append(ByteBuffer(bytes: data.dropFirst(split)))
            if let head = try? parser.head() {
                for method in ["GET", "HEAD", "CONNECT"] {
                    _ = try? ResponseHeadParser.framing(of: head, method: method)
                }
            }
        case .contentDisposition:
            if let disposition = ContentDisposition(parsing: text), let name = disposition.filename {
                _ = SafeFilename.sanitize(name)
            }
        case .setCookie:
            for url in ["https://www.example.com/a/b", "http://192.0.2.1/"] {
                guard let url = URL(string: url) else { continue }
                _ = SetCookieParser.cookie(from: text, for: url, now: Self.now)
            }
        case .cookiesTxt:
            if let cookies = try? NetscapeCookieFile.cookies(in: text, now: Self.now) {
                _ = NetscapeCookieFile.text(for: cookies)
            }
        case .netrc:
            _ = try? Netrc(parsing: text)
        case .digestChallenge:
            let fields = text.split(separator: "\n").map(String.init)
            for challenge in Challenge.parse(fields) {
                guard let digest = DigestAuthentication(challenge) else { continue }
                _ = digest.authorization(
                    for: Credential(user: "ada", password: "s3cret"),
                    method: "GET",
                    uri: "/",
                    cnonce: "0a4f113b"
                )
            }
        case .contentRange:
            _ = ContentRange(text)
        case .resumeData:
            _ = try? ResumeData(decoding: data)
        case .uploadFields:
            let fields = text.split(separator: "\n").compactMap { line -> (name: String, value: String)? in
                let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2 else { return nil }
                return (String(parts[0]), parts[1].trimmingCharacters(in: .whitespaces))
            }
            _ = UploadFields(HeaderFields(fields))
            for field in fields { _ = UploadLimits(fieldValue: field.value) }
        case .uploadResumeData:
            _ = try? UploadResumeData(decoding: data)
        }
    }
}
