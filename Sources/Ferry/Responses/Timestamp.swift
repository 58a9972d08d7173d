import Foundation

/// RFC 3339 timestamps (`2026-11-24T11:41:20Z`), the form of dates in resume data, checkpoints
/// and the daemon's API.
///
/// Written in UTC with `Z`; read with `Z` or a numeric offset, with or without fractional
/// seconds, which is what `JSONEncoder`'s `.iso8601` strategy and `Date.ISO8601FormatStyle`
/// wrote before, so files and answers from earlier builds still read.
enum Timestamp {
    /// `date` in UTC: whole seconds, or milliseconds when `milliseconds` is set.
    static func format(_ date: Date, milliseconds: Bool = false) -> String {
        let time = CivilTime(date)
        var text = "\(CivilTime.padded(time.year, 4))-\(CivilTime.padded(time.month, 2))-"
        text += "\(CivilTime.padded(time.day, 2))T\(CivilTime.padded(time.hour, 2)):"
        text += "\(CivilTime.padded(time.minute, 2)):\(CivilTime.padded(time.second, 2))"
        if milliseconds {
            let fraction = date.timeIntervalSince1970 - date.timeIntervalSince1970.rounded(.down)
            text += "." + CivilTime.padded(min(999, Int((fraction * 1000).rounded(.down))), 3)
        }
        return text + "Z"
    }

    /// The instant `text` names, or `nil` when it is not an RFC 3339 date-time.
    static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54 || bytes[10] == 0x74,
            bytes[13] == 0x3A, bytes[16] == 0x3A,
            let year = digits(bytes, 0, 4), let month = digits(bytes, 5, 2), let day = digits(bytes, 8, 2),
            let hour = digits(bytes, 11, 2), let minute = digits(bytes, 14, 2), let second = digits(bytes, 17, 2),
            let civil = CivilTime(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        else { return nil }
        var index = 19
        var fraction = 0.0
        if bytes[index] == 0x2E {  // "." 1*DIGIT
            var scale = 0.1
            index += 1
            let start = index
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offset = 0
        switch bytes[index] {
        case 0x5A, 0x7A:  // "Z"
            guard index + 1 == bytes.count else { return nil }
        case 0x2B, 0x2D:  // "+hh:mm" / "-hh:mm"
            guard index + 6 == bytes.count, bytes[index + 3] == 0x3A,
                let hours = digits(bytes, index + 1, 2), let minutes = digits(bytes, index + 4, 2),
                hours <= 23, minutes <= 59
            else { return nil }
            offset = (hours * 3600 + minutes * 60) * (bytes[index] == 0x2D ? -1 : 1)
        default:
            return nil
        }
        return Date(timeIntervalSince1970: civil.date.timeIntervalSince1970 - TimeInterval(offset) + fraction)
    }

    /// A `JSONEncoder` strategy that writes dates in this format.
    static func encoding(milliseconds: Bool = false) -> JSONEncoder.DateEncodingStrategy {
        .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(format(date, milliseconds: milliseconds))
        }
    }

    /// A `JSONDecoder` strategy that reads dates in this format.
    static let decoding = JSONDecoder.DateDecodingStrategy.custom { decoder in
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let date = parse(text) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "Not an RFC 3339 date: \(text)")
        }
        return date
    }

    private static func digits(_ bytes: [UInt8], _ start: Int, _ count: Int) -> Int? {
        guard start + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[start..<start + count] {
            guard (0x30...0x39).contains(byte) else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }
}
