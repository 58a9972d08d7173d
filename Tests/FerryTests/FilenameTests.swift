import Foundation
import Testing

@testable import Ferry

@Suite("Hostile file names")
struct FilenameTests {
    @Test(arguments: [
        ("../../x", "x"),
        ("/etc/passwd", "passwd"),
        ("..\\..\\windows\\system.ini", "system.ini"),
        ("..", "download"),
        (".", "download"),
        ("", "download"),
        (".bashrc", "bashrc"),
        ("a\u{0}b\nc\r.txt", "abc.txt"),
        ("report\u{202E}fdp.exe", "reportfdp.exe"),
        ("  spaced name.txt  ", "spaced name.txt"),
        ("dir/", "dir"),
    ])
    func sanitizes(input: String, expected: String) {
        #expect(SafeFilename.sanitize(input) == expected)
    }

    @Test func boundsLengthKeepingTheExtension() {
        let long = String(repeating: "é", count: 400) + ".tar.gz"
        let safe = SafeFilename.sanitize(long)
        #expect(safe.utf8.count <= 255)
        #expect(safe.hasSuffix(".gz"))
        #expect(!safe.contains("/"))
    }

    @Test func contentDispositionPrefersExtendedName() {
        let parsed = ContentDisposition(
            parsing: "attachment; filename=\"plain.txt\"; filename*=UTF-8''na%C3%AFve%20file.txt"
        )
        #expect(parsed?.type == "attachment")
        #expect(parsed?.filename == "naïve file.txt")
    }

    @Test func contentDispositionQuotedAndEscaped() {
        #expect(ContentDisposition(parsing: "attachment; filename=\"a\\\"b.txt\"")?.filename == "a\"b.txt")
        #expect(ContentDisposition(parsing: "inline; filename=bare.bin")?.filename == "bare.bin")
        #expect(ContentDisposition(parsing: "inline")?.filename == nil)
        #expect(ContentDisposition(parsing: "") == nil)
    }

    @Test func suggestedFilenameIsAlwaysABaseName() {
        let url = URL(string: "http://h/files/..%2F..%2Fevil.sh")!
        var response = HTTPResponse(url: url, statusCode: 200)
        #expect(response.suggestedFilename == "evil.sh")
        response.headers["Content-Disposition"] = "attachment; filename=\"../../x\""
        #expect(response.suggestedFilename == "x")
        response.headers["Content-Disposition"] = "attachment; filename=\"..\""
        #expect(response.suggestedFilename == "evil.sh")
        #expect(HTTPResponse(url: URL(string: "http://h/")!, statusCode: 200).suggestedFilename == "download")
    }
}
