import Foundation

/// HTTP-date (RFC 9110 §5.6.7): IMF-fixdate, and the obsolete RFC 850 and asctime forms a
/// recipient must accept.
///
/// ```
/// IMF-fixdate   Sun, 06 Nov 1994 08:49:37 GMT
/// rfc850-date   Sunday, 06-Nov-94 08:49:37 GMT
/// asctime-date  Sun Nov  6 08:49:37 1994
/// ```
///
/// Names of days and months are matched without regard to case and the day name is not
/// checked against the date (servers get it wrong; the date is what is compared). Anything
/// else that is not one of the three forms, or names a day or time that does not exist, is
/// `nil`: callers treat an invalid date as absent or as the past, as RFC 9111 §5.3 says.
enum HTTPDate {
    private static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    private static let longDayNames = ["sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"]

    /// The instant `value` names, or `nil` when it is not an HTTP-date.
    /// - Parameters:
    ///   - value: The field value; surrounding whitespace is ignored.
    ///   - now: For RFC 850's two-digit years: a year that would be more than 50 years after
    ///     `now` is the most recent past year with those digits.
    static func parse(_ value: String, now: Date = Date()) -> Date? {
        let words = value.trimmingWhitespace().split(separator: " ")
        switch words.count {
        case 6:  // IMF-fixdate: "Sun," "06" "Nov" "1994" "08:49:37" "GMT"
            guard words[0].hasSuffix(","), dayNames.contains(words[0].dropLast().lowercased()), words[5] == "GMT",
                words[1].count == 2, words[3].count == 4
            else { return nil }
            return civil(day: words[1], month: words[2], year: number(words[3]), time: words[4])
        case 4:  // rfc850-date: "Sunday," "06-Nov-94" "08:49:37" "GMT"
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false)
            guard words[0].hasSuffix(","), longDayNames.contains(words[0].dropLast().lowercased()), words[3] == "GMT",
                parts.count == 3, parts[0].count == 2, parts[2].count == 2, let twoDigits = number(parts[2])
            else { return nil }
            return civil(day: parts[0], month: parts[1], year: fullYear(twoDigits, now: now), time: words[2])
        case 5:  // asctime-date: "Sun" "Nov" "6" "08:49:37" "1994" (the day is space-padded)
            guard dayNames.contains(words[0].lowercased()), words[4].count == 4 else { return nil }
            return civil(day: words[2], month: words[1], year: number(words[4]), time: words[3])
        default:
            return nil
        }
    }

    /// `date` as an IMF-fixdate, the form a sender generates.
    static func format(_ date: Date) -> String {
        let time = CivilTime(date)
        let day = dayNames[time.weekday].capitalized
        let month = CivilTime.monthAbbreviations[time.month - 1].capitalized
        let clock = [time.hour, time.minute, time.second].map { CivilTime.padded($0, 2) }.joined(separator: ":")
        return "\(day), \(CivilTime.padded(time.day, 2)) \(month) \(CivilTime.padded(time.year, 4)) \(clock) GMT"
    }

    private static func civil(day: Substring, month: Substring, year: Int?, time: Substring) -> Date? {
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...2).contains(day.count), let day = number(day), let year,
            let month = CivilTime.monthAbbreviations.firstIndex(of: month.lowercased()),
            clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
            let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2])
        else { return nil }
        return CivilTime(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second)?.date
    }

    /// Decimal digits only: no sign, no spaces.
    private static func number(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int(text)
    }

    private static func fullYear(_ twoDigits: Int, now: Date) -> Int {
        let current = CivilTime(now).year
        var year = current - current % 100 + twoDigits
        if year > current + 50 { year -= 100 }
        return year
    }
}
