import Foundation

/// Dates as receipts write them, `2026-11-27T13:08:59Z` (RFC 3339, UTC, to the second), read and
/// written by arithmetic on the proleptic Gregorian calendar: a receipt of 100 purchases holds 300
/// of them, and Foundation's ISO 8601 styles took most of the time of reading or writing one.
public enum UTCDate {
    /// `date` as `YYYY-MM-DDTHH:MM:SSZ`, the second below it (years 1 to 9999; others are clamped).
    public static func rfc3339(_ date: Date) -> String {
        format(date, between: UInt8(ascii: "T"), after: UInt8(ascii: "Z"))
    }

    /// `date` as `YYYY-MM-DD HH:MM:SS` in UTC shifted by `offset` seconds (for Apple's `_pst` dates).
    public static func plain(_ date: Date, offset: Int = 0) -> String {
        format(date.addingTimeInterval(TimeInterval(offset)), between: UInt8(ascii: " "), after: nil)
    }

    /// Appends ``plain(_:offset:)``'s 19 bytes to `out`, with no string made on the way (a
    /// verifyReceipt answer's purchases written directly).
    public static func appendPlain(_ date: Date, offset: Int = 0, to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: 19))
        out.withUnsafeMutableBufferPointer { buffer in
            _ = write(date.addingTimeInterval(TimeInterval(offset)), between: UInt8(ascii: " "), after: nil, into: UnsafeMutableBufferPointer(rebasing: buffer[start...]))
        }
    }

    private static func format(_ date: Date, between: UInt8, after: UInt8?) -> String {
        // Written into the string's own storage: 300 dates of a verifyReceipt answer, each once.
        String(unsafeUninitializedCapacity: 20) { text in write(date, between: between, after: after, into: text) }
    }

    /// Writes the date's 19 or 20 bytes at the start of `text`; returns how many.
    private static func write(_ date: Date, between: UInt8, after: UInt8?, into text: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let (year, month, day, hour, minute, second) = fields(date)
        func put(_ value: Int, _ digits: Int, at start: Int) {
            var rest = value
            for index in stride(from: start + digits - 1, through: start, by: -1) {
                text[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
        }
        put(year, 4, at: 0)
        text[4] = UInt8(ascii: "-")
        put(month, 2, at: 5)
        text[7] = UInt8(ascii: "-")
        put(day, 2, at: 8)
        text[10] = between
        put(hour, 2, at: 11)
        text[13] = UInt8(ascii: ":")
        put(minute, 2, at: 14)
        text[16] = UInt8(ascii: ":")
        put(second, 2, at: 17)
        guard let after else { return 19 }
        text[19] = after
        return 20
    }

    /// The date of `YYYY-MM-DDTHH:MM:SSZ` (nil when a field is out of range, such as February 30);
    /// other RFC 3339 forms (fractions, offsets) through Foundation; nil for anything else.
    public static func parse(_ text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 20 else { return try? Date(text, strategy: Date.ISO8601FormatStyle(timeZone: .gmt)) }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"), bytes[19] == UInt8(ascii: "Z"),
            let year = number(bytes[0..<4]), let month = number(bytes[5..<7]), let day = number(bytes[8..<10]),
            let hour = number(bytes[11..<13]), let minute = number(bytes[14..<16]), let second = number(bytes[17..<19]),
            year >= 1, (1...12).contains(month), (1...daysIn(month, year)).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        let seconds = days(year: year, month: month, day: day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Days from 1970-01-01 to the date (negative before it).
    static func days(year: Int, month: Int, day: Int) -> Int64 {
        // Years counted from March, so that February's leap day ends the year.
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func fields(_ date: Date) -> (Int, Int, Int, Int, Int, Int) {
        let limit = 253_402_300_799.0 // 9999-12-31T23:59:59Z
        let seconds = Int64(min(max(date.timeIntervalSince1970, -62_135_596_800), limit).rounded(.down))
        var days = seconds / 86_400
        var rest = seconds % 86_400
        if rest < 0 { rest += 86_400; days -= 1 }
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day), Int(rest / 3600), Int(rest % 3600 / 60), Int(rest % 60))
    }

    static func daysIn(_ month: Int, _ year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for digit in digits {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }

}
