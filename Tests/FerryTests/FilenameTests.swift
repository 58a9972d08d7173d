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

    /// The names the fast path returns as they are are exactly names every step leaves as
    /// they are; the others go through the steps.
    @Test(arguments: [
        "report.pdf", "a", "x~1.tar.gz", "a.", "index.html?q=1", String(repeating: "n", count: 255),
        String(repeating: "n", count: 256), ".hidden", "a b", "a/b", "a\\b", " a", "a\t", "caf\u{E9}",
        "e\u{202E}x", "", "..", "-", "%41",
    ])
    func thePlainNamePathAgreesWithEveryStep(name: String) {
        if SafeFilename.isPlain(name) { #expect(SafeFilename.cleaned(name, fallback: "download") == name) }
        #expect(SafeFilename.sanitize(name) == SafeFilename.cleaned(name, fallback: "download"))
    }

    @Test func plainNamesAreOnlyPrintableASCIIWithoutSeparatorsOrALeadingDot() {
        #expect(SafeFilename.isPlain("report.pdf"))
        #expect(SafeFilename.isPlain(String(repeating: "n", count: 255)))
        for name in ["", ".a", "a b", "a/b", "a\\b", "caf\u{E9}", "a\u{7F}", String(repeating: "n", count: 256)] {
            #expect(!SafeFilename.isPlain(name), "\(name)")
        }
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
        #expect(HTTPResponse(url: URL(string: "http://h/dir/sub//")!, statusCode: 200).suggestedFilename == "sub")
        #expect(HTTPResponse(url: URL(string: "http://h/a//b.txt")!, statusCode: 200).suggestedFilename == "b.txt")
        #expect(HTTPResponse(url: URL(string: "http://h/caf%C3%A9")!, statusCode: 200).suggestedFilename == "café")
        #expect(HTTPResponse(url: URL(string: "http://h")!, statusCode: 200).suggestedFilename == "download")
    }

    /// Security review 15: bidirectional controls (embeddings, overrides, isolates), marks
    /// and zero-width characters never reach a name: `report\u{2066}fdp.exe` must not show
    /// as something it is not.
    @Test("13.15: bidi controls and zero-width characters never reach a file name")
    func bidiAndZeroWidthCharactersAreRemoved() {
        for hidden in [
            "\u{202A}", "\u{202B}", "\u{202C}", "\u{202D}", "\u{202E}", "\u{2066}", "\u{2067}", "\u{2068}",
            "\u{2069}", "\u{200B}", "\u{200C}", "\u{200D}", "\u{200E}", "\u{200F}", "\u{2060}", "\u{FEFF}",
        ] {
            #expect(
                SafeFilename.sanitize("report\(hidden)fdp.exe") == "reportfdp.exe",
                "U+\(String(hidden.unicodeScalars.first!.value, radix: 16))"
            )
        }
        // Letters of other scripts stay.
        #expect(SafeFilename.sanitize("отчёт-報告.pdf") == "отчёт-報告.pdf")
    }
}
