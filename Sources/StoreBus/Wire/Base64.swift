/// Base64 (RFC 4648, the standard alphabet, padded), as proto3 JSON writes `bytes` fields, for the
/// bodies that carry megabytes of them (downloads' chunks): swift-protobuf's own encoder took three
/// quarters of the download service's time.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    /// Each byte's 6-bit value; 0xFF for bytes outside the alphabet. The URL-safe `-` and `_` are
    /// taken too, as proto3 JSON readers take them.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        table[Int(UInt8(ascii: "-"))] = 62
        table[Int(UInt8(ascii: "_"))] = 63
        return table
    }()

    /// Appends the encoding of `bytes` to `out`.
    public static func encode(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        let count = bytes.count
        let start = out.count
        let length = (count + 2) / 3 * 4
        out.append(contentsOf: repeatElement(0, count: length))
        alphabet.withUnsafeBufferPointer { alphabet in
            out.withUnsafeMutableBufferPointer { buffer in
                var write = start
                var read = 0
                while read + 3 <= count {
                    let value = UInt32(bytes[read]) << 16 | UInt32(bytes[read + 1]) << 8 | UInt32(bytes[read + 2])
                    buffer[write] = alphabet[Int(value >> 18)]
                    buffer[write + 1] = alphabet[Int(value >> 12 & 0x3F)]
                    buffer[write + 2] = alphabet[Int(value >> 6 & 0x3F)]
                    buffer[write + 3] = alphabet[Int(value & 0x3F)]
                    read += 3
                    write += 4
                }
                let left = count - read
                if left > 0 {
                    let value = UInt32(bytes[read]) << 16 | (left == 2 ? UInt32(bytes[read + 1]) << 8 : 0)
                    buffer[write] = alphabet[Int(value >> 18)]
                    buffer[write + 1] = alphabet[Int(value >> 12 & 0x3F)]
                    buffer[write + 2] = left == 2 ? alphabet[Int(value >> 6 & 0x3F)] : UInt8(ascii: "=")
                    buffer[write + 3] = UInt8(ascii: "=")
                }
            }
        }
    }

    /// The bytes `text` encodes (padding optional), or nil when it is not base64.
    public static func decode(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var count = text.count
        while count > 0 && text[count - 1] == UInt8(ascii: "=") { count -= 1 }
        guard text.count - count <= 2, count % 4 != 1 else { return nil }
        var out = [UInt8](repeating: 0, count: count / 4 * 3 + max(0, count % 4 - 1))
        let valid = values.withUnsafeBufferPointer { values in
            out.withUnsafeMutableBufferPointer { buffer -> Bool in
                var read = 0
                var write = 0
                var bad: UInt8 = 0
                while read + 4 <= count {
                    let a = values[Int(text[read])], b = values[Int(text[read + 1])]
                    let c = values[Int(text[read + 2])], d = values[Int(text[read + 3])]
                    bad |= a | b | c | d
                    let value = UInt32(a & 0x3F) << 18 | UInt32(b & 0x3F) << 12 | UInt32(c & 0x3F) << 6 | UInt32(d & 0x3F)
                    buffer[write] = UInt8(truncatingIfNeeded: value >> 16)
                    buffer[write + 1] = UInt8(truncatingIfNeeded: value >> 8)
                    buffer[write + 2] = UInt8(truncatingIfNeeded: value)
                    read += 4
                    write += 3
                }
                let left = count - read
                if left >= 2 {
                    let a = values[Int(text[read])], b = values[Int(text[read + 1])]
                    let c = left == 3 ? values[Int(text[read + 2])] : 0
                    bad |= a | b | c
                    let value = UInt32(a & 0x3F) << 18 | UInt32(b & 0x3F) << 12 | UInt32(c & 0x3F) << 6
                    buffer[write] = UInt8(truncatingIfNeeded: value >> 16)
                    if left == 3 { buffer[write + 1] = UInt8(truncatingIfNeeded: value >> 8) }
                }
                // 0xFF marks a byte outside the alphabet; every valid value is below 0x40.
                return bad & 0xC0 == 0
            }
        }
        return valid ? out : nil
    }
}
