import Testing

@testable import Ferry

/// Field names compare case-insensitively, letters only (RFC 9110 §5.1).
@Suite struct HeaderFieldsTests {
    @Test func namesMatchWhateverTheirCase() {
        let fields: HeaderFields = ["content-length": "12", "ETag": "\"a\""]
        #expect(fields["Content-Length"] == "12")
        #expect(fields["CONTENT-LENGTH"] == "12")
        #expect(fields["etag"] == "\"a\"")
    }

    @Test func onlyLettersFoldTheirCase() {
        // '-' (0x2D) and '\r' (0x0D) differ by 0x20 as 'a' and 'A' do, but are not letters.
        #expect(!HeaderFields.sameName("a-b", "a\rb"))
        #expect(!HeaderFields.sameName("a[b", "a{b"))
        #expect(HeaderFields.sameName("X-Token", "x-tOKEN"))
    }

    @Test func aNameThatIsAPrefixOfAnotherIsNotIt() {
        #expect(!HeaderFields.sameName("Content-Length", "Content-Lengthx"))
        #expect(!HeaderFields.sameName("Content-Lengthx", "Content-Length"))
        #expect(!HeaderFields.sameName("", "a"))
        #expect(HeaderFields.sameName("", ""))
        let fields: HeaderFields = ["Content-Lengthx": "1", "Content-Lengt": "2"]
        #expect(fields["Content-Length"] == nil)
    }

    @Test func nonASCIINamesCompareByTheirBytes() {
        #expect(HeaderFields.sameName("Größe", "GRößE"))
        #expect(!HeaderFields.sameName("Größe", "GRÖßE"))
    }

    @Test func settingANameReplacesEveryFieldOfItWhereTheFirstStood() {
        var fields: HeaderFields = ["A": "1", "Set-Cookie": "x=1", "B": "2", "set-cookie": "y=2"]
        #expect(fields.values(for: "SET-COOKIE") == ["x=1", "y=2"])
        fields["Set-Cookie"] = "z=3"
        #expect(fields.fields.map(\.name) == ["A", "Set-Cookie", "B"])
        #expect(fields.values(for: "set-cookie") == ["z=3"])
        fields["set-cookie"] = nil
        #expect(fields.fields.map(\.name) == ["A", "B"])
    }
}
