import Foundation
import Testing

@testable import Ferry

@Suite("Redaction of URLs in log lines and listings")
struct RedactionTests {
    @Test(arguments: [
        // A password goes; the user stays.
        ("https://ann:secret@cdn.example/f", "https://ann:REDACTED@cdn.example/f"),
        // A user alone is no secret.
        ("https://ann@cdn.example/f", "https://ann@cdn.example/f"),
        // An "@" in the password: the last "@" of the authority ends the user information.
        ("http://ann:p@ss@h:8080/f", "http://ann:REDACTED@h:8080/f"),
        // Every known signature parameter, any case, the others kept in their order.
        (
            "https://s3/b/k?X-Amz-Credential=AK%2F1&X-Amz-Signature=9f0a&x-id=GetObject",
            "https://s3/b/k?X-Amz-Credential=REDACTED&X-Amz-Signature=REDACTED&x-id=GetObject"
        ),
        ("https://gcs/o?x-goog-signature=abc&alt=media", "https://gcs/o?x-goog-signature=REDACTED&alt=media"),
        (
            "https://h/f?sig=1&SIGNATURE=2&token=3&access_token=4",
            "https://h/f?sig=REDACTED&SIGNATURE=REDACTED&token=REDACTED&access_token=REDACTED"
        ),
        // A percent-encoded name is still that name; the fragment stays.
        ("https://h/f?%73ig=1#part", "https://h/f?%73ig=REDACTED#part"),
        // Names that only contain a secret's name are not it; empty pairs stay.
        ("https://h/f?signed=1&&tokens=2&sig", "https://h/f?signed=1&&tokens=2&sig"),
        // Nothing to redact: the text itself.
        ("https://h/f?page=2", "https://h/f?page=2"),
        ("no url here", "no url here"),
        ("", ""),
    ])
    func aURLAlone(url: String, expected: String) {
        #expect(Redaction.redactingURLs(in: url) == expected)
    }

    @Test func urlsInsideTextAreFoundAndTheTextAroundThemKept() {
        let line =
            "task 7 started: https://ann:pw@h/f?sig=abc → /tmp/f (retrying 'http://bo:pw2@g/x?token=t'), see <ftp://u:p@i/>."
        #expect(
            Redaction.redactingURLs(in: line)
                == "task 7 started: https://ann:REDACTED@h/f?sig=REDACTED → /tmp/f (retrying 'http://bo:REDACTED@g/x?token=REDACTED'), see <ftp://u:REDACTED@i/>."
        )
    }

    @Test func punctuationThatEndsASentenceIsNotPartOfTheURL() {
        #expect(Redaction.redactingURLs(in: "(see http://a:b@h/?sig=x).") == "(see http://a:REDACTED@h/?sig=REDACTED).")
        #expect(Redaction.redactingURLs(in: "at http://h/?token=x, then") == "at http://h/?token=REDACTED, then")
    }

    @Test func malformedTextNeverTraps() {
        for text in [
            "://", "a://", "://@:", "x://:@", "h://a:b@", "s://?", "s://?=&=", "é://ü:ö@ä/?sig=ß", "\u{0}://\u{0}",
        ] {
            let redacted = Redaction.redactingURLs(in: text)
            #expect(!redacted.isEmpty)
        }
        #expect(Redaction.redactingURLs(in: "h://ü:ö@ä/?sig=ß") == "h://ü:REDACTED@ä/?sig=REDACTED")
        // No scheme before "://": not a URL, left as it is.
        #expect(Redaction.redactingURLs(in: "é://ü:ö@ä/?sig=ß") == "é://ü:ö@ä/?sig=ß")
    }

    @Test func aRecordAsListedShowsNoSecret() {
        var record = BackgroundTaskRecord(
            session: "s",
            url: "https://ann:pw@h/f?sig=abc",
            headers: ["Authorization": "Bearer t0k"],
            destination: "/tmp/f"
        )
        record.mirrors = ["https://m/f?X-Amz-Signature=m1"]
        record.errorMessage = "'https://ann:pw@h/f?sig=abc' answered 403"
        record.responseHeaders = ["Location": "https://h/g?token=loc"]
        let listed = record.withURLsRedacted
        let text = String(decoding: (try? JSONEncoder().encode(listed)) ?? Data(), as: UTF8.self)
        for secret in ["pw@", "abc", "t0k", "m1", "loc"] { #expect(!text.contains(secret), "\(secret) in \(text)") }
        #expect(listed.url == "https://ann:REDACTED@h/f?sig=REDACTED")
        #expect(listed.destination == "/tmp/f")
    }
}
