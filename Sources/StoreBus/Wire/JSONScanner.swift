import Foundation

/// A validating scanner over JSON text that finds an object's members, or an array's elements,
/// without building values: for readers that need a few members of a large document (the gateway
/// copying callbacks out of event records, the flow benchmark reading the answers it checks).
public enum JSONScanner {
    /// Deepest nesting accepted (as the RPC layer's decoder).
    public static let maxDepth = 64

    /// The members of the object spanning `range` exactly (surrounding whitespace allowed), each
    /// value's range well-formed JSON; nil when the text is not such an object or a member name holds
    /// an escape.
    public static func members(of json: [UInt8], in range: Range<Int>) -> [(name: String, value: Range<Int>)]? {
        members(of: json, in: range, nestedIn: nil)?.members
    }

    /// The members of the object spanning `range` (see ``members(of:in:)``) and, found in the same
    /// pass, the members of the object that is the value of its member `name` (nil when there is no
    /// such member or its value is not an object; the last one when the name is given twice): the
    /// nested object's text is scanned once instead of twice.
    public static func members(of json: [UInt8], in range: Range<Int>, andOf name: String) -> (members: [(name: String, value: Range<Int>)], nested: [(name: String, value: Range<Int>)]?)? {
        members(of: json, in: range, nestedIn: Array(name.utf8))
    }

    private static func members(of json: [UInt8], in range: Range<Int>, nestedIn nestedName: [UInt8]?) -> (members: [(name: String, value: Range<Int>)], nested: [(name: String, value: Range<Int>)]?)?
    {
        precondition(range.lowerBound >= 0 && range.upperBound <= json.count, "JSONScanner: range out of the text")
        return json.withUnsafeBufferPointer { text in
            let start = skipSpace(text, range.lowerBound, range.upperBound)
            guard start < range.upperBound, text[start] == UInt8(ascii: "{") else { return nil }
            var result: [(name: String, value: Range<Int>)] = []
            var nested: [(name: String, value: Range<Int>)]?
            let objectEnd = skipObject(
                text, start, range.upperBound, depth: 0,
                value: { name, valueStart, depth in
                    guard let nestedName, text[valueStart] == UInt8(ascii: "{"), UnsafeBufferPointer(rebasing: text[name]).elementsEqual(nestedName) else {
                        return skipValue(text, valueStart, range.upperBound, depth: depth)
                    }
                    guard depth <= maxDepth else { return nil }
                    var inner: [(name: String, value: Range<Int>)] = []
                    let end = skipObject(text, valueStart, range.upperBound, depth: depth) { collect(text, $0, $1, into: &inner) }
                    nested = inner
                    return end
                }
            ) { collect(text, $0, $1, into: &result) }
            guard let objectEnd, skipSpace(text, objectEnd, range.upperBound) == range.upperBound else { return nil }
            return (result, nested)
        }
    }

    /// The members of the object spanning `range` exactly (surrounding whitespace allowed), each as
    /// the range of its name (without the quotes) and of its value, in the order they come: the same
    /// text accepted and refused as by ``members(of:in:)``, no name made into a String. For readers
    /// that must see every member (to refuse one they do not know) of many objects.
    public static func memberRanges(of json: [UInt8], in range: Range<Int>) -> [(name: Range<Int>, value: Range<Int>)]? {
        precondition(range.lowerBound >= 0 && range.upperBound <= json.count, "JSONScanner: range out of the text")
        return json.withUnsafeBufferPointer { text in
            let start = skipSpace(text, range.lowerBound, range.upperBound)
            guard start < range.upperBound, text[start] == UInt8(ascii: "{") else { return nil }
            var result: [(name: Range<Int>, value: Range<Int>)] = []
            guard
                let objectEnd = skipObject(
                    text, start, range.upperBound, depth: 0,
                    member: { name, value in
                        guard !UnsafeBufferPointer(rebasing: text[name]).contains(UInt8(ascii: "\\")) else { return false }
                        result.append((name, value))
                        return true
                    }),
                skipSpace(text, objectEnd, range.upperBound) == range.upperBound
            else { return nil }
            return result
        }
    }

    /// The value of the member `name` of the object spanning `range` (see ``members(of:in:)``); nil
    /// when the text is not such an object or has no such member.
    public static func member(_ name: String, of json: [UInt8], in range: Range<Int>) -> Range<Int>? {
        members(of: json, in: range)?.first { $0.name == name }?.value
    }

    /// The elements of the array spanning `range` exactly (surrounding whitespace allowed), each
    /// well-formed JSON; nil when the text is not such an array.
    public static func elements(of json: [UInt8], in range: Range<Int>) -> [Range<Int>]? {
        precondition(range.lowerBound >= 0 && range.upperBound <= json.count, "JSONScanner: range out of the text")
        return json.withUnsafeBufferPointer { text in
            var result: [Range<Int>] = []
            let taken = walkArray(text, range) { start in
                guard let valueEnd = skipValue(text, start, range.upperBound, depth: 1) else { return nil }
                result.append(start..<valueEnd)
                return valueEnd
            }
            return taken ? result : nil
        }
    }

    /// The members of each element of the array spanning `range` exactly (surrounding whitespace
    /// allowed), every element an object (see ``members(of:in:)``), found in one pass: nil when the
    /// text is not such an array, an element is not an object, or a member name holds an escape.
    public static func objects(of json: [UInt8], in range: Range<Int>) -> [[(name: String, value: Range<Int>)]]? {
        precondition(range.lowerBound >= 0 && range.upperBound <= json.count, "JSONScanner: range out of the text")
        return json.withUnsafeBufferPointer { text in
            var result: [[(name: String, value: Range<Int>)]] = []
            let taken = walkArray(text, range) { start in
                guard start < range.upperBound, text[start] == UInt8(ascii: "{") else { return nil }
                var members: [(name: String, value: Range<Int>)] = []
                guard let objectEnd = skipObject(text, start, range.upperBound, depth: 1, member: { collect(text, $0, $1, into: &members) }) else { return nil }
                result.append(members)
                return objectEnd
            }
            return taken ? result : nil
        }
    }

    /// The values of the members `names` of the object spanning `range` (see ``members(of:in:)``),
    /// in the order of `names`: nil for a name the object lacks, the last value for one it gives
    /// twice. The same text is accepted and refused as by ``members(of:in:)``, and no member's name
    /// is made into a String: for readers that want a few members of each of many objects.
    public static func values(of json: [UInt8], in range: Range<Int>, named names: [[UInt8]]) -> [Range<Int>?]? {
        precondition(range.lowerBound >= 0 && range.upperBound <= json.count, "JSONScanner: range out of the text")
        return json.withUnsafeBufferPointer { text in
            let start = skipSpace(text, range.lowerBound, range.upperBound)
            guard start < range.upperBound, text[start] == UInt8(ascii: "{") else { return nil }
            var values = [Range<Int>?](repeating: nil, count: names.count)
            guard let objectEnd = skipObject(text, start, range.upperBound, depth: 0, member: { pick(text, $0, $1, names, into: &values) }),
                skipSpace(text, objectEnd, range.upperBound) == range.upperBound
            else { return nil }
            return values
        }
    }

    /// ``values(of:in:named:)`` for each element of the array spanning `range`, every element an
    /// object, in one pass; the same text is accepted and refused as by ``objects(of:in:)``.
    public static func objectValues(of json: [UInt8], in range: Range<Int>, named names: [[UInt8]]) -> [[Range<Int>?]]? {
        precondition(range.lowerBound >= 0 && range.upperBound <= json.count, "JSONScanner: range out of the text")
        return json.withUnsafeBufferPointer { text in
            var result: [[Range<Int>?]] = []
            let taken = walkArray(text, range) { start in
                guard start < range.upperBound, text[start] == UInt8(ascii: "{") else { return nil }
                var values = [Range<Int>?](repeating: nil, count: names.count)
                guard let objectEnd = skipObject(text, start, range.upperBound, depth: 1, member: { pick(text, $0, $1, names, into: &values) }) else { return nil }
                result.append(values)
                return objectEnd
            }
            return taken ? result : nil
        }
    }

    /// Keeps `value` in `values` at the place of its member's name among `names`, if it is there;
    /// false when the name holds an escape (as ``collect(_:_:_:into:)``).
    private static func pick(_ text: UnsafeBufferPointer<UInt8>, _ name: Range<Int>, _ value: Range<Int>, _ names: [[UInt8]], into values: inout [Range<Int>?]) -> Bool {
        let nameBytes = UnsafeBufferPointer(rebasing: text[name])
        guard !nameBytes.contains(UInt8(ascii: "\\")) else { return false }
        if let index = names.firstIndex(where: { $0.elementsEqual(nameBytes) }) { values[index] = value }
        return true
    }

    /// Walks the array spanning `range` exactly (surrounding whitespace allowed), giving `element`
    /// where each element starts; it returns where the element ends, or nil to refuse it. False when
    /// the text is not such an array or an element was refused.
    private static func walkArray(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, element: (_ start: Int) -> Int?) -> Bool {
        let end = range.upperBound
        var index = skipSpace(text, range.lowerBound, end)
        guard index < end, text[index] == UInt8(ascii: "[") else { return false }
        index = skipSpace(text, index + 1, end)
        if index < end, text[index] == UInt8(ascii: "]") {
            return skipSpace(text, index + 1, end) == end
        }
        while true {
            guard let elementEnd = element(index) else { return false }
            index = skipSpace(text, elementEnd, end)
            guard index < end else { return false }
            if text[index] == UInt8(ascii: "]") { break }
            guard text[index] == UInt8(ascii: ",") else { return false }
            index = skipSpace(text, index + 1, end)
        }
        return skipSpace(text, index + 1, end) == end
    }

    /// Adds the member `name` (its range without the quotes) to `list`; false, adding nothing, when
    /// the name holds an escape.
    private static func collect(_ text: UnsafeBufferPointer<UInt8>, _ name: Range<Int>, _ value: Range<Int>, into list: inout [(name: String, value: Range<Int>)]) -> Bool {
        let nameBytes = UnsafeBufferPointer(rebasing: text[name])
        guard !nameBytes.contains(UInt8(ascii: "\\")) else { return false }
        list.append((String(decoding: nameBytes, as: UTF8.self), value))
        return true
    }

    /// A uint64 written as proto3 JSON writes one (a quoted decimal) or as a bare decimal.
    public static func unsigned(_ json: [UInt8], _ range: Range<Int>) -> UInt64? {
        var digits = range
        if json[range.lowerBound] == UInt8(ascii: "\"") {
            guard range.count >= 3 else { return nil }
            digits = (range.lowerBound + 1)..<(range.upperBound - 1)
        }
        return decimal(json, digits)
    }

    /// The value of the decimal digits spanning `range` exactly (no sign, no quotes); nil when it
    /// is empty, holds anything but digits, or does not fit 64 bits.
    public static func decimal(_ json: [UInt8], _ range: Range<Int>) -> UInt64? {
        guard !range.isEmpty, range.count <= 20 else { return nil }
        var value: UInt64 = 0
        for byte in json[range] {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        return value
    }

    /// Whether every byte is ASCII (text that needs no UTF-8 check): one pass with no early exit,
    /// which the compiler vectorizes.
    public static func isASCII(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { buffer in buffer.reduce(0, |) < 0x80 }
    }

    /// The bytes of a string value without escapes; nil when the value is not a string or holds one.
    public static func plainString(_ json: [UInt8], _ range: Range<Int>) -> [UInt8]? {
        plainContent(json, range).map { Array(json[$0]) }
    }

    /// The text of a string value without escapes, its UTF-8 checked, read from `json` in place;
    /// nil when the value is not such a string. (The scanner that found `range` has refused raw
    /// control characters already.)
    public static func plainText(_ json: [UInt8], _ range: Range<Int>) -> String? {
        plainContent(json, range).flatMap { String(validating: json[$0], as: UTF8.self) }
    }

    /// The text of a string value, its escapes decoded, its UTF-8 checked; nil when the value is
    /// not a string or holds a `\u` escape of half a surrogate pair without its other half (left to
    /// a full decoder to refuse or replace). A value without escapes is read as ``plainText(_:_:)``
    /// reads it; one with escapes (clients that write `/` as `\/`, as NSJSONSerialization and PHP
    /// do in base64) is copied once with them decoded. `range` is a value the scanner checked.
    public static func text(_ json: [UInt8], _ range: Range<Int>) -> String? {
        guard json[range.lowerBound] == UInt8(ascii: "\""), range.count >= 2 else { return nil }
        if let content = plainContent(json, range) { return String(validating: json[content], as: UTF8.self) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(range.count)
        var index = range.lowerBound + 1
        let end = range.upperBound - 1
        func hex4(_ at: Int) -> UInt32? {
            guard at + 4 <= end else { return nil }
            var value: UInt32 = 0
            for byte in json[at..<(at + 4)] {
                guard let digit = hexValue(byte) else { return nil }
                value = value << 4 | UInt32(digit)
            }
            return value
        }
        while index < end {
            let byte = json[index]
            guard byte == UInt8(ascii: "\\") else {
                bytes.append(byte)
                index += 1
                continue
            }
            guard index + 1 < end else { return nil }
            switch json[index + 1] {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(json[index + 1])
            case UInt8(ascii: "b"): bytes.append(0x08)
            case UInt8(ascii: "f"): bytes.append(0x0C)
            case UInt8(ascii: "n"): bytes.append(0x0A)
            case UInt8(ascii: "r"): bytes.append(0x0D)
            case UInt8(ascii: "t"): bytes.append(0x09)
            case UInt8(ascii: "u"):
                guard var scalar = hex4(index + 2) else { return nil }
                index += 6
                if (0xD800..<0xDC00).contains(scalar) {
                    // A high surrogate: its low half must follow as the next escape.
                    guard index + 1 < end, json[index] == UInt8(ascii: "\\"), json[index + 1] == UInt8(ascii: "u"),
                        let low = hex4(index + 2), (0xDC00..<0xE000).contains(low)
                    else { return nil }
                    scalar = 0x10000 + (scalar - 0xD800) << 10 + (low - 0xDC00)
                    index += 6
                }
                guard let unicode = Unicode.Scalar(scalar) else { return nil }
                UTF8.encode(unicode) { bytes.append($0) }
                continue
            default:
                return nil
            }
            index += 2
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of an ASCII hex digit; nil for any other byte.
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Where the content of a string value without escapes lies (between its quotes); nil when the
    /// value is not a string or holds an escape. The backslash is looked for with memchr, which
    /// reads a word at a time: values carry receipts and signed payloads of kilobytes.
    private static func plainContent(_ json: [UInt8], _ range: Range<Int>) -> Range<Int>? {
        guard json[range.lowerBound] == UInt8(ascii: "\""), range.count >= 2 else { return nil }
        let content = (range.lowerBound + 1)..<(range.upperBound - 1)
        let escaped = json[content].withUnsafeBytes { bytes in
            bytes.baseAddress.map { memchr($0, Int32(UInt8(ascii: "\\")), bytes.count) != nil } ?? false
        }
        return escaped ? nil : content
    }

    /// The members of the object `body` is, when it is all ASCII and no name is given twice: the
    /// shape of a request the hand-written readers take (anything else goes to swift-protobuf).
    public static func plainMembers(_ body: [UInt8]) -> [(name: String, value: Range<Int>)]? {
        guard isASCII(body), let members = members(of: body, in: body.indices), distinctNames(members) else { return nil }
        return members
    }

    /// Whether no name is given twice.
    public static func distinctNames(_ members: [(name: String, value: Range<Int>)]) -> Bool {
        for (index, member) in members.enumerated() where members[..<index].contains(where: { $0.name == member.name }) {
            return false
        }
        return true
    }

    /// `true` or `false` (the value at `range`, checked JSON), nil for any other value.
    public static func bool(_ json: [UInt8], _ range: Range<Int>) -> Bool? {
        switch range.count {
        case 4 where json[range.lowerBound] == UInt8(ascii: "t"): return true
        case 5 where json[range.lowerBound] == UInt8(ascii: "f"): return false
        default: return nil
        }
    }

    private static func skipSpace(_ json: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Int {
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
    private static func skipValue(_ json: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, depth: Int) -> Int? {
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
        _ json: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, depth: Int,
        value skip: ((_ name: Range<Int>, _ start: Int, _ depth: Int) -> Int?)? = nil,
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
            let valueEnd = if let skip { skip(name, valueStart, depth + 1) } else { skipValue(json, valueStart, end, depth: depth + 1) }
            guard let valueEnd, member(name, valueStart..<valueEnd)
            else { return nil }
            index = skipSpace(json, valueEnd, end)
            guard index < end else { return nil }
            if json[index] == UInt8(ascii: "}") { return index + 1 }
            guard json[index] == UInt8(ascii: ",") else { return nil }
            index = skipSpace(json, index + 1, end)
        }
    }

    private static func literal(_ word: StaticString, _ json: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Int? {
        let count = word.utf8CodeUnitCount
        guard end - start >= count else { return nil }
        for offset in 0..<count where json[start + offset] != word.utf8Start[offset] { return nil }
        return start + count
    }

    /// The end of the string starting at `start` (its opening quote), escapes checked; nil when it
    /// is unterminated or holds a raw control character or a bad escape.
    private static func skipString(_ json: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Int? {
        var index = start + 1
        while index < end {
            index = skipPlainWords(json, index, end)
            guard index < end else { return nil }
            var byte = json[index]
            // Most of a string is bytes that stand for themselves: step over them in a tight loop.
            while byte >= 0x20, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") {
                index += 1
                guard index < end else { return nil }
                byte = json[index]
            }
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
            default:
                return nil // a raw control character
            }
        }
        return nil
    }

    /// From `index`, steps over eight bytes at a time while none of them is a quote, a backslash or
    /// a control character, and returns the position of the first that is (or of the last bytes,
    /// fewer than eight, left to look at one by one). Each word is tested with the usual bit tricks:
    /// `(x - 0x01…01) & ~x & 0x80…80` marks bytes that are zero, so applied to the word XORed with a
    /// byte value it marks that value, and with `0x20…20` subtracted it marks bytes below 0x20. A
    /// borrow can mark a byte above a marked one, never below, so the lowest mark is exact. Bytes
    /// from 0x80 (UTF-8 beyond ASCII) are never marked.
    @inline(__always)
    private static func skipPlainWords(_ json: UnsafeBufferPointer<UInt8>, _ index: Int, _ end: Int) -> Int {
        guard let base = json.baseAddress else { return index }
        var index = index
        while index + 8 <= end {
            let marks = stringMarks(UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)))
            if marks != 0 { return index + marks.trailingZeroBitCount / 8 }
            index += 8
        }
        return index
    }

    /// The high bit of each byte of `word` (little-endian) that a JSON string cannot hold as it
    /// is (a quote, a backslash, a control character), and perhaps of bytes above a marked one
    /// (see ``skipPlainWords(_:_:_:)``): zero exactly when the word holds none of them.
    @inlinable @inline(__always)
    public static func stringMarks(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        return ((quote &- ones) & ~quote | (backslash &- ones) & ~backslash | (word &- ones &* 0x20) & ~word) & 0x8080_8080_8080_8080
    }

    /// Whether some byte of `word` is `byte`.
    @inlinable @inline(__always)
    public static func wordHolds(_ word: UInt64, _ byte: UInt8) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let matched = word ^ (ones &* UInt64(byte))
        return (matched &- ones) & ~matched & 0x8080_8080_8080_8080 != 0
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        hexValue(byte) != nil
    }

    /// The end of a number in JSON's grammar: -? int frac? exp?
    private static func skipNumber(_ json: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Int? {
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
