import Foundation
import StoreBus

/// Small helpers to write proto3 JSON text by hand where decoding and re-encoding would be waste
/// (the event log stores each event's JSON once and serves it as is; the payment queue writes its
/// transactions' JSON directly).
public enum JSONText {
    /// Appends RFC 3339 UTC time with milliseconds, as proto3 JSON writes a Timestamp
    /// (`2026-11-21T01:02:03.456Z`), without quotes.
    static func appendMillisecondTimestamp(_ milliseconds: Int64, to text: inout [UInt8]) {
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        appendDateTime(seconds: seconds, to: &text)
        text.append(UInt8(ascii: "."))
        appendDigits(Int(milliseconds - seconds * 1000), width: 3, to: &text)
        text.append(UInt8(ascii: "Z"))
    }

    /// Appends a google.protobuf.Timestamp's proto3 JSON, quotes included, as swift-protobuf writes
    /// it: RFC 3339 UTC with no fraction when `nanos` is 0, else 3, 6 or 9 digits, the fewest that
    /// hold it (`"2026-11-21T01:02:03Z"`, `"2026-11-21T01:02:03.450Z"`). Returns false, appending
    /// nothing, for a time proto3 JSON cannot write (outside years 1 to 9999, or `nanos` outside
    /// 0 to 999,999,999).
    public static func appendTimestamp(seconds: Int64, nanos: Int32, to out: inout [UInt8]) -> Bool {
        // 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
        guard (-62_135_596_800...253_402_300_799).contains(seconds), (0..<1_000_000_000).contains(nanos) else { return false }
        out.append(UInt8(ascii: "\""))
        appendDateTime(seconds: seconds, to: &out)
        if nanos != 0 {
            out.append(UInt8(ascii: "."))
            if nanos % 1_000_000 == 0 {
                appendDigits(Int(nanos / 1_000_000), width: 3, to: &out)
            } else if nanos % 1_000 == 0 {
                appendDigits(Int(nanos / 1_000), width: 6, to: &out)
            } else {
                appendDigits(Int(nanos), width: 9, to: &out)
            }
        }
        out.append(UInt8(ascii: "Z"))
        out.append(UInt8(ascii: "\""))
        return true
    }

    /// Appends a uint64 as proto3 JSON writes one: its decimal digits in quotes (`"42"`).
    public static func appendQuoted(_ value: UInt64, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        out += String(value).utf8
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `text` as a JSON string literal, quotes included, escaped as swift-protobuf escapes
    /// strings: `\b \t \n \f \r \" \\` by name, other C0 and C1 control characters and DEL as
    /// `\u00XX` (uppercase hex digits), everything else as its UTF-8.
    public static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escape: one scan of their bytes in place, then one copy.
        let copied = text.utf8.withContiguousStorageIfAvailable { bytes in
            if anyNeedsScan(bytes) { return false }
            out.append(contentsOf: bytes)
            return true
        }
        switch copied {
        case true?:
            break
        case nil where !text.utf8.contains(where: needsScan):
            out.append(contentsOf: text.utf8)
        default:
            appendEscaped(text, to: &out)
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The characters of `text`, escaped as ``appendQuoted(_:to:)`` says.
    private static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 8: out += Array("\\b".utf8)
            case 9: out += Array("\\t".utf8)
            case 10: out += Array("\\n".utf8)
            case 12: out += Array("\\f".utf8)
            case 13: out += Array("\\r".utf8)
            case 34: out += Array("\\\"".utf8)
            case 92: out += Array("\\\\".utf8)
            case 0...31, 127...159:
                out += Array("\\u00".utf8)
                out.append(hexDigits[Int(scalar.value / 16)])
                out.append(hexDigits[Int(scalar.value & 15)])
            default:
                out.append(contentsOf: String(scalar).utf8)
            }
        }
    }

    /// Bytes that may need an escape: ASCII controls, quote, backslash, DEL, and the lead byte of
    /// U+0080 to U+00BF (C1 controls among them, checked scalar by scalar).
    private static func needsScan(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F || byte == 0xC2
    }

    /// Whether any of `bytes` is one ``needsScan(_:)`` names. With ``FastPaths`` on, eight bytes at
    /// a time with the JSON scanner's word tests (`JSONScanner.stringMarks`, `wordHolds`): a
    /// receipt's 500 KB of base64 went through the byte-by-byte loop in a quarter of a refresh's
    /// CPU. Off, byte by byte. `JSONTextTests` holds the two to the same answers.
    static func anyNeedsScan(_ bytes: UnsafeBufferPointer<UInt8>, wordwise: Bool = FastPaths.enabled) -> Bool {
        guard wordwise, bytes.count >= 8, let base = bytes.baseAddress else { return bytes.contains(where: needsScan) }
        var offset = 0
        while offset + 8 <= bytes.count {
            let word = UInt64(littleEndian: UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self))
            if JSONScanner.stringMarks(word) != 0 || JSONScanner.wordHolds(word, 0x7F) || JSONScanner.wordHolds(word, 0xC2) { return true }
            offset += 8
        }
        return UnsafeBufferPointer(rebasing: bytes[offset...]).contains(where: needsScan)
    }

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Appends `YYYY-MM-DDTHH:MM:SS` of `seconds` since 1970 (UTC).
    private static func appendDateTime(seconds: Int64, to text: inout [UInt8]) {
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
        appendDigits(year, width: 4, to: &text)
        text.append(UInt8(ascii: "-"))
        appendDigits(month, width: 2, to: &text)
        text.append(UInt8(ascii: "-"))
        appendDigits(day, width: 2, to: &text)
        text.append(UInt8(ascii: "T"))
        appendDigits(secondOfDay / 3600, width: 2, to: &text)
        text.append(UInt8(ascii: ":"))
        appendDigits((secondOfDay / 60) % 60, width: 2, to: &text)
        text.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay % 60, width: 2, to: &text)
    }

    /// Appends `value` in decimal, zero-padded to at least `width` digits.
    private static func appendDigits(_ value: Int, width: Int, to text: inout [UInt8]) {
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
}
