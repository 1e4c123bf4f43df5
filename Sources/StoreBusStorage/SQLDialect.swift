/// What differs in how the two engines read the same SQL text.
public enum SQLDialect {
    /// `sql` as PostgreSQL takes it: each parameter `?` is `$n`, n counting from 1 as SQLite counts
    /// them (one more than the highest number so far), and `?N` is `$N`; SQLite's index hints
    /// (`INDEXED BY name`) are left out, PostgreSQL's planner choosing for itself. Quoted text
    /// ('…'), quoted names ("…") and comments are left as they are.
    public static func numberedParameters(_ sql: String) -> String {
        let bytes = Array(sql.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        var highest = 0
        var index = 0
        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                // To the closing quote; a doubled quote inside is part of the text.
                var end = index + 1
                while end < bytes.count {
                    if bytes[end] == byte {
                        if end + 1 < bytes.count, bytes[end + 1] == byte {
                            end += 2
                            continue
                        }
                        break
                    }
                    end += 1
                }
                let stop = min(end + 1, bytes.count)
                out += bytes[index..<stop]
                index = stop
            case UInt8(ascii: "-") where index + 1 < bytes.count && bytes[index + 1] == UInt8(ascii: "-"):
                var end = index
                while end < bytes.count, bytes[end] != UInt8(ascii: "\n") { end += 1 }
                out += bytes[index..<end]
                index = end
            case UInt8(ascii: "?"):
                var end = index + 1
                while end < bytes.count, isDigit(bytes[end]) { end += 1 }
                let number: Int
                if end > index + 1 {
                    number = Int(String(decoding: bytes[(index + 1)..<end], as: UTF8.self)) ?? 0
                } else {
                    number = highest + 1
                }
                highest = max(highest, number)
                out.append(UInt8(ascii: "$"))
                out += String(number).utf8
                index = end
            case UInt8(ascii: "I"), UInt8(ascii: "i"):
                if let end = indexHintEnd(bytes, at: index) {
                    index = end
                } else {
                    out.append(byte)
                    index += 1
                }
            default:
                out.append(byte)
                index += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The end of `INDEXED BY name` (any case) starting at `start` after a space, its leading space
    /// taken with it; nil when there is none there.
    private static func indexHintEnd(_ bytes: [UInt8], at start: Int) -> Int? {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x09 || byte == 0x0D }
        func isName(_ byte: UInt8) -> Bool {
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F
        }
        func word(_ text: String, at index: Int) -> Int? {
            let word = Array(text.utf8)
            guard index + word.count <= bytes.count else { return nil }
            for (offset, letter) in word.enumerated() where bytes[index + offset] | 0x20 != letter { return nil }
            let end = index + word.count
            return end < bytes.count && isName(bytes[end]) ? nil : end
        }
        guard start > 0, isSpace(bytes[start - 1]), var index = word("indexed", at: start) else { return nil }
        guard index < bytes.count, isSpace(bytes[index]) else { return nil }
        while index < bytes.count, isSpace(bytes[index]) { index += 1 }
        guard let afterBy = word("by", at: index), afterBy < bytes.count, isSpace(bytes[afterBy]) else { return nil }
        index = afterBy
        while index < bytes.count, isSpace(bytes[index]) { index += 1 }
        let nameStart = index
        while index < bytes.count, isName(bytes[index]) { index += 1 }
        return index > nameStart ? index : nil
    }
}
