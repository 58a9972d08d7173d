import Foundation

/// A UTC calendar date and time of day, converted to and from `Date` by arithmetic alone.
///
/// HTTP dates, cookie dates and the timestamps in resume data are all proleptic Gregorian
/// and UTC, so they need no calendar, time zone or locale. Foundation's formatters load ICU's
/// calendar and time-zone data for them (about 2 MiB of a download's resident memory, and a
/// formatter made per call); this type is the few lines of arithmetic those formats need.
///
/// The day counts follow Howard Hinnant's `days_from_civil` and `civil_from_days`.
struct CivilTime: Equatable, Sendable {
    var year: Int
    /// 1…12.
    var month: Int
    /// 1…31.
    var day: Int
    var hour: Int
    var minute: Int
    var second: Int

    /// The fields, or `nil` when one is out of range (February 30th, hour 24, second 61).
    init?(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int) {
        guard (1...12).contains(month), (1...Self.days(inMonth: month, of: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        (self.year, self.month, self.day) = (year, month, day)
        (self.hour, self.minute, self.second) = (hour, minute, second)
    }

    /// The UTC fields of `date`, to the whole second below it.
    init(_ date: Date) {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let ofDay = seconds - days * 86_400
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        (hour, minute, second) = (ofDay / 3600, ofDay % 3600 / 60, ofDay % 60)
    }

    /// The months' English abbreviations, lowercased, January first: the names HTTP and
    /// cookie dates use.
    static let monthAbbreviations = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ]

    /// Days since 1970-01-01.
    var daysSinceEpoch: Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The instant these fields name in UTC (a leap second counts as the next second's start).
    var date: Date {
        Date(timeIntervalSince1970: TimeInterval(daysSinceEpoch * 86_400 + hour * 3600 + minute * 60 + second))
    }

    /// 0 for Sunday … 6 for Saturday.
    var weekday: Int {
        let days = daysSinceEpoch
        return ((days % 7) + 11) % 7  // 1970-01-01 was a Thursday (4).
    }

    static func days(inMonth month: Int, of year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// `value` as decimal digits, zero-padded to `width`.
    static func padded(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }
}
