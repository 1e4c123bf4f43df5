import StoreBus
import StoreSchema

/// Observer callbacks in proto3 JSON, made from the payment queue's event JSON.
///
/// The common events, transactions updated and removed, become callbacks by moving bytes: the
/// callback's `updatedTransactions` (or `removedTransactions`) is the event payload's member of the
/// same name, field for field the same message (`{"transactions": [PaymentTransaction...]}`), so it is
/// copied as it is instead of being decoded into messages and encoded again. The record's positions
/// and key are read and checked against the doorbell, and the record has been checked to be
/// well-formed JSON in valid UTF-8, so a copy can never break an answer's syntax. A field of
/// PaymentTransaction newer than this gateway passes through; clients ignore unknown fields, as
/// proto3 JSON readers do. Anything else (other events, escapes in the key, field names spelled in
/// snake_case, members this gateway does not know) goes through the full decode.
enum ObserverEventJSON {
    /// The callback JSON of a payment-queue event record, or nil when `json` is not the record at
    /// `seq`, `key`, `keySeq`.
    static func callback(record json: [UInt8], seq: UInt64, key: String, keySeq: UInt64) -> [UInt8]? {
        if let spliced = splice(json, seq: seq, key: key, keySeq: keySeq) { return spliced }
        guard let record = try? JSONCodec.decode(Storebus_PaymentQueue_V1_QueueEventRecord.self, from: json),
              record.seq == seq, record.key == key, record.keySeq == keySeq
        else { return nil }
        return try? JSONCodec.encode(GatewayService.callback(record))
    }

    /// The callback JSON by copying, or nil when the record is not of the shape copied.
    static func splice(_ json: [UInt8], seq: UInt64, key: String, keySeq: UInt64) -> [UInt8]? {
        // Copied bytes must be valid UTF-8 as well as JSON: ASCII is, the rest is checked.
        guard json.allSatisfy({ $0 < 0x80 }) || String(validating: json, as: UTF8.self) != nil,
              let record = JSONScanner.members(of: json, in: 0..<json.count)
        else { return nil }
        var seen: Set<String> = []
        var payload: Range<Int>?
        for member in record {
            // A member given twice is left to the decoder to judge.
            guard seen.insert(member.name).inserted else { return nil }
            switch member.name {
            case "seq":
                guard JSONScanner.unsigned(json, member.value) == seq else { return nil }
            case "key":
                guard JSONScanner.plainString(json, member.value) == Array(key.utf8) else { return nil }
            case "keySeq":
                guard JSONScanner.unsigned(json, member.value) == keySeq else { return nil }
            case "payload":
                payload = member.value
            case "type", "time":
                continue
            default:
                return nil
            }
        }
        guard seen.isSuperset(of: ["seq", "key", "keySeq"]), let payload,
              let members = JSONScanner.members(of: json, in: payload)
        else { return nil }
        var callback: (name: String, value: Range<Int>)?
        for member in members {
            switch member.name {
            case "updatedTransactions", "removedTransactions":
                guard callback == nil, json[member.value.lowerBound] == UInt8(ascii: "{") else { return nil }
                callback = (member.name, member.value)
            case "queue":
                continue
            default:
                return nil
            }
        }
        guard let callback else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(callback.value.count + callback.name.utf8.count + 32)
        out += #"{"seq":""#.utf8
        out += String(keySeq).utf8
        out += #"",""#.utf8
        out += callback.name.utf8
        out += #"":"#.utf8
        out += json[callback.value]
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// An ObserveResponse holding `events` (callback JSON each) and `headSeq`.
    static func response(events: [[UInt8]], headSeq: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(events.reduce(40) { $0 + $1.count + 1 })
        out += #"{"events":["#.utf8
        for (index, event) in events.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += event
        }
        out += #"],"headSeq":""#.utf8
        out += String(headSeq).utf8
        out += #""}"#.utf8
        return out
    }
}

/// A validating scanner over JSON text that finds an object's members without building values.
enum JSONScanner {
    /// Deepest nesting accepted (as the RPC layer's decoder).
    static let maxDepth = 64

    /// The members of the object spanning `range` exactly (surrounding whitespace allowed), each
    /// value's range well-formed JSON; nil when the text is not such an object or a member name holds
    /// an escape.
    static func members(of json: [UInt8], in range: Range<Int>) -> [(name: String, value: Range<Int>)]? {
        let start = skipSpace(json, range.lowerBound, range.upperBound)
        guard start < range.upperBound, json[start] == UInt8(ascii: "{") else { return nil }
        var result: [(name: String, value: Range<Int>)] = []
        let objectEnd = skipObject(json, start, range.upperBound, depth: 0) { name, value in
            let nameBytes = json[name]
            guard !nameBytes.contains(UInt8(ascii: "\\")) else { return false }
            result.append((String(decoding: nameBytes, as: UTF8.self), value))
            return true
        }
        guard let objectEnd, skipSpace(json, objectEnd, range.upperBound) == range.upperBound else { return nil }
        return result
    }

    /// A uint64 written as proto3 JSON writes one (a quoted decimal) or as a bare decimal.
    static func unsigned(_ json: [UInt8], _ range: Range<Int>) -> UInt64? {
        var digits = range
        if json[range.lowerBound] == UInt8(ascii: "\"") {
            guard range.count >= 3 else { return nil }
            digits = (range.lowerBound + 1)..<(range.upperBound - 1)
        }
        guard !digits.isEmpty, digits.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in json[digits] {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        return value
    }

    /// The bytes of a string value without escapes; nil when the value is not a string or holds one.
    static func plainString(_ json: [UInt8], _ range: Range<Int>) -> [UInt8]? {
        guard json[range.lowerBound] == UInt8(ascii: "\"") else { return nil }
        let content = json[(range.lowerBound + 1)..<(range.upperBound - 1)]
        return content.contains(UInt8(ascii: "\\")) ? nil : Array(content)
    }

    private static func skipSpace(_ json: [UInt8], _ start: Int, _ end: Int) -> Int {
        var index = start
        while index < end {
            switch json[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return index
            }
        }
        return index
    }

    /// The end of the value starting at `start`, or nil when it is not well-formed JSON.
    private static func skipValue(_ json: [UInt8], _ start: Int, _ end: Int, depth: Int) -> Int? {
        guard start < end, depth <= maxDepth else { return nil }
        switch json[start] {
        case UInt8(ascii: "\""):
            return skipString(json, start, end)
        case UInt8(ascii: "{"):
            return skipObject(json, start, end, depth: depth) { _, _ in true }
        case UInt8(ascii: "["):
            var index = skipSpace(json, start + 1, end)
            if index < end, json[index] == UInt8(ascii: "]") { return index + 1 }
            while true {
                guard let valueEnd = skipValue(json, index, end, depth: depth + 1) else { return nil }
                index = skipSpace(json, valueEnd, end)
                guard index < end else { return nil }
                if json[index] == UInt8(ascii: "]") { return index + 1 }
                guard json[index] == UInt8(ascii: ",") else { return nil }
                index = skipSpace(json, index + 1, end)
            }
        case UInt8(ascii: "t"):
            return literal("true", json, start, end)
        case UInt8(ascii: "f"):
            return literal("false", json, start, end)
        case UInt8(ascii: "n"):
            return literal("null", json, start, end)
        default:
            return skipNumber(json, start, end)
        }
    }

    /// The end of the object starting at `start` (its opening brace), each member's name (without
    /// its quotes) and value given to `member`, which may refuse it (the object is then not taken);
    /// nil when it is not well-formed.
    private static func skipObject(
        _ json: [UInt8], _ start: Int, _ end: Int, depth: Int,
        member: (_ name: Range<Int>, _ value: Range<Int>) -> Bool
    ) -> Int? {
        var index = skipSpace(json, start + 1, end)
        if index < end, json[index] == UInt8(ascii: "}") { return index + 1 }
        while true {
            guard index < end, json[index] == UInt8(ascii: "\""), let nameEnd = skipString(json, index, end) else { return nil }
            let name = (index + 1)..<(nameEnd - 1)
            index = skipSpace(json, nameEnd, end)
            guard index < end, json[index] == UInt8(ascii: ":") else { return nil }
            let valueStart = skipSpace(json, index + 1, end)
            guard let valueEnd = skipValue(json, valueStart, end, depth: depth + 1),
                  member(name, valueStart..<valueEnd)
            else { return nil }
            index = skipSpace(json, valueEnd, end)
            guard index < end else { return nil }
            if json[index] == UInt8(ascii: "}") { return index + 1 }
            guard json[index] == UInt8(ascii: ",") else { return nil }
            index = skipSpace(json, index + 1, end)
        }
    }

    private static func literal(_ word: StaticString, _ json: [UInt8], _ start: Int, _ end: Int) -> Int? {
        let count = word.utf8CodeUnitCount
        guard end - start >= count else { return nil }
        for offset in 0..<count where json[start + offset] != word.utf8Start[offset] { return nil }
        return start + count
    }

    /// The end of the string starting at `start` (its opening quote), escapes checked; nil when it
    /// is unterminated or holds a raw control character or a bad escape.
    private static func skipString(_ json: [UInt8], _ start: Int, _ end: Int) -> Int? {
        var index = start + 1
        while index < end {
            let byte = json[index]
            switch byte {
            case UInt8(ascii: "\""):
                return index + 1
            case UInt8(ascii: "\\"):
                guard index + 1 < end else { return nil }
                switch json[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                     UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 2
                case UInt8(ascii: "u"):
                    guard index + 6 <= end, json[(index + 2)..<(index + 6)].allSatisfy(isHexDigit) else { return nil }
                    index += 6
                default:
                    return nil
                }
            case 0..<0x20:
                return nil
            default:
                index += 1
            }
        }
        return nil
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// The end of a number in JSON's grammar: -? int frac? exp?
    private static func skipNumber(_ json: [UInt8], _ start: Int, _ end: Int) -> Int? {
        var index = start
        func digits() -> Bool {
            let first = index
            while index < end, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(json[index]) { index += 1 }
            return index > first
        }
        if index < end, json[index] == UInt8(ascii: "-") { index += 1 }
        guard index < end else { return nil }
        if json[index] == UInt8(ascii: "0") {
            index += 1
        } else if !digits() {
            return nil
        }
        if index < end, json[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() else { return nil }
        }
        if index < end, json[index] == UInt8(ascii: "e") || json[index] == UInt8(ascii: "E") {
            index += 1
            if index < end, json[index] == UInt8(ascii: "+") || json[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() else { return nil }
        }
        return index
    }
}
