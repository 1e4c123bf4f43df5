import Foundation

/// Small helpers to write proto3 JSON text by hand where decoding and re-encoding would be waste
/// (the event log stores each event's JSON once and serves it as is).
enum JSONText {
    /// A JSON string literal for `text`, quotes included.
    static func quoted(_ text: String) -> String {
        // Most keys and names need no escape: one scan of the bytes, then one copy.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return "\"" + text + "\""
        }
        var out = "\""
        out.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += String(format: "\\u%04x", scalar.value)
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
        return out
    }

    /// RFC 3339 UTC time with milliseconds, as proto3 JSON writes a Timestamp
    /// (`2026-11-21T01:02:03.456Z`).
    static func timestamp(milliseconds: Int64) -> String {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let millis = Int(milliseconds - seconds * 1000)
        var days = Int(seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400)
        let secondOfDay = Int(seconds - Int64(days) * 86_400)
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        // Written digit by digit: String(format:) cost about 4% of the payment queue's commit thread.
        var text: [UInt8] = []
        text.reserveCapacity(24)
        func append(_ value: Int, width: Int) {
            if value < 0 { text.append(UInt8(ascii: "-")) }
            let magnitude = Int(value.magnitude)
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            while magnitude / divisor >= 10 { divisor *= 10 }
            var rest = magnitude
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(rest / divisor))
                rest %= divisor
                divisor /= 10
            }
        }
        append(year, width: 4)
        text.append(UInt8(ascii: "-"))
        append(month, width: 2)
        text.append(UInt8(ascii: "-"))
        append(day, width: 2)
        text.append(UInt8(ascii: "T"))
        append(secondOfDay / 3600, width: 2)
        text.append(UInt8(ascii: ":"))
        append((secondOfDay / 60) % 60, width: 2)
        text.append(UInt8(ascii: ":"))
        append(secondOfDay % 60, width: 2)
        text.append(UInt8(ascii: "."))
        append(millis, width: 3)
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }
}
