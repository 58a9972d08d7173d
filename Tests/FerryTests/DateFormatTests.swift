import Foundation
import Testing

@testable import Ferry

/// HTTP-date, RFC 3339 and the calendar arithmetic under them, checked against dates whose
/// instants are known, against Foundation's own ISO 8601 formatter, and at the edges.
@Suite("HTTP dates and timestamps")
struct DateFormatTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT: RFC 9110's example.
    let example = Date(timeIntervalSince1970: 784_111_777)
    let now = Date(timeIntervalSince1970: 1_795_000_000)  // 2026-11-18

    @Test func theThreeFormsOfRFC9110() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == example)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now) == example)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == example)
        #expect(HTTPDate.parse("  Sun, 06 Nov 1994 08:49:37 GMT\t") == example)
        #expect(HTTPDate.parse("sun, 06 nov 1994 08:49:37 GMT") == example)
        // The day name is not checked against the date.
        #expect(HTTPDate.parse("Mon, 06 Nov 1994 08:49:37 GMT") == example)
    }

    @Test func whatIsNotAnHTTPDate() {
        for text in [
            "", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000",
            "06 Nov 1994 08:49:37 GMT", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
            "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 1995 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT",
            "Sun Nov  6 08:49:37", "1994-11-06T08:49:37Z", "0",
        ] {
            #expect(HTTPDate.parse(text) == nil, "\(text)")
        }
        #expect(HTTPDate.parse("Tue, 29 Feb 2028 00:00:00 GMT") != nil)
        #expect(HTTPDate.parse("Tue, 29 Feb 2100 00:00:00 GMT") == nil)
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") != nil)
    }

    @Test func rfc850YearsMoreThanFiftyYearsAheadAreInThePast() throws {
        let seventySix = try #require(HTTPDate.parse("Friday, 01-Jan-76 00:00:00 GMT", now: now))
        #expect(CivilTime(seventySix).year == 2076)
        let seventySeven = try #require(HTTPDate.parse("Friday, 01-Jan-77 00:00:00 GMT", now: now))
        #expect(CivilTime(seventySeven).year == 1977)
    }

    @Test func formatWritesIMFFixdateAndReadsBack() {
        #expect(HTTPDate.format(example) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 951_782_400)) == "Tue, 29 Feb 2000 00:00:00 GMT")
        for seconds in stride(from: -2_208_988_800, through: 4_102_444_800, by: 7_777_777) {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(HTTPDate.parse(HTTPDate.format(date)) == date)
        }
    }

    @Test func civilTimeAgreesWithFoundationsCalendar() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        for seconds in stride(from: -5_000_000_000, through: 5_000_000_000, by: 86_399 * 97) {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let fields = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
            let civil = CivilTime(date)
            #expect(
                [civil.year, civil.month, civil.day, civil.hour, civil.minute, civil.second, civil.weekday + 1]
                    == [
                        fields.year, fields.month, fields.day, fields.hour, fields.minute, fields.second,
                        fields.weekday,
                    ]
            )
            #expect(civil.date == date)
        }
    }

    @Test func timestampsAreRFC3339InUTC() {
        #expect(Timestamp.format(example) == "1994-11-06T08:49:37Z")
        #expect(Timestamp.format(example.addingTimeInterval(0.25), milliseconds: true) == "1994-11-06T08:49:37.250Z")
        #expect(Timestamp.parse("1994-11-06T08:49:37Z") == example)
        #expect(Timestamp.parse("1994-11-06t08:49:37z") == example)
        #expect(Timestamp.parse("1994-11-06T09:49:37+01:00") == example)
        #expect(Timestamp.parse("1994-11-06T03:19:37-05:30") == example)
        #expect(Timestamp.parse("1994-11-06T08:49:37.5Z") == example.addingTimeInterval(0.5))
        for text in [
            "1994-11-06T08:49:37", "1994-11-06 08:49:37Z", "1994-11-31T08:49:37Z", "1994-11-06T08:49:37.Z",
            "1994-11-06T08:49:37+0100", "1994-11-06T08:49:37+24:00", "94-11-06T08:49:37Z", "1994-11-06T08:49:37Zx",
            "Sun, 06 Nov 1994 08:49:37 GMT",
        ] {
            #expect(Timestamp.parse(text) == nil, "\(text)")
        }
    }

    @Test func timestampsReadWhatFoundationsISO8601Wrote() throws {
        let dates = [example, Date(timeIntervalSince1970: 1_795_000_123.456), Date(timeIntervalSince1970: 0)]
        for date in dates {
            let whole = date.formatted(Date.ISO8601FormatStyle())
            #expect(Timestamp.parse(whole) == Date(timeIntervalSince1970: date.timeIntervalSince1970.rounded(.down)))
            let fractional = date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            let parsed = try #require(Timestamp.parse(fractional))
            #expect(abs(parsed.timeIntervalSince(date)) < 0.002)
            #expect(Timestamp.format(date) == whole)
        }
    }

    @Test func resumeDataStillReadsAndWritesTheSameJSON() throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        struct Stamp: Codable, Equatable { var at: Date }
        let old = try encoder.encode(Stamp(at: example))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = Timestamp.decoding
        #expect(try decoder.decode(Stamp.self, from: old) == Stamp(at: example))
        let ours = JSONEncoder()
        ours.dateEncodingStrategy = Timestamp.encoding()
        #expect(try ours.encode(Stamp(at: example)) == old)
        #expect(throws: DecodingError.self) { try decoder.decode(Stamp.self, from: Data(#"{"at":"yesterday"}"#.utf8)) }
    }
}
