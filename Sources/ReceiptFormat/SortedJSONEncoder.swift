import Foundation

/// An `Encodable`'s JSON with its object keys in byte order, written without Foundation's
/// JSONEncoder: for the payloads of the JWS StoreBus signs (structs of strings, integers, booleans,
/// nested structs and arrays), where JSONEncoder (sorting keys, boxing every value, then writing)
/// took as much CPU as the ES256 signature. It writes what JSONEncoder with
/// `[.sortedKeys, .withoutEscapingSlashes]` writes for them (`SortedJSONEncoderTests`, byte for
/// byte, with JSONEncoder as the plain twin). A value it does not write as JSONEncoder would (a
/// floating-point number, a date, data, a URL, a decimal, a super encoder) is refused with
/// ``Unsupported``; ``JWS/sign(_:with:written:)`` then uses JSONEncoder.
public enum SortedJSONEncoder {
    /// A value this encoder leaves to JSONEncoder.
    public struct Unsupported: Error, CustomStringConvertible {
        public let description: String
    }

    /// `value` as JSON.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = TreeEncoder()
        try value.encode(to: encoder)
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(encoder.value ?? .object(ObjectBox()), to: &out)
        return out
    }

    // MARK: The tree

    final class ObjectBox {
        var members: [(key: String, value: Node)] = []
        func set(_ key: String, _ value: Node) {
            if let index = members.firstIndex(where: { $0.key == key }) { members[index].value = value } else { members.append((key, value)) }
        }
    }

    final class ArrayBox {
        var items: [Node] = []
    }

    enum Node {
        case string(String)
        case number(String)
        case bool(Bool)
        case null
        case object(ObjectBox)
        case array(ArrayBox)
    }

    static func unsupported(_ what: String) -> Unsupported { Unsupported(description: "\(what) is left to JSONEncoder") }

    /// The node of one value: its own encoder's.
    static func node(_ value: some Encodable) throws -> Node {
        switch value {
        case let text as String: return .string(text)
        case let flag as Bool: return .bool(flag)
        case is Date, is Data, is URL, is Decimal, is Double, is Float: throw unsupported("\(type(of: value))")
        default:
            let encoder = TreeEncoder()
            try value.encode(to: encoder)
            // A value that encoded nothing is an empty object, as JSONEncoder writes it.
            return encoder.value ?? .object(ObjectBox())
        }
    }

    final class TreeEncoder: Encoder {
        var codingPath: [any CodingKey] = []
        var userInfo: [CodingUserInfoKey: Any] = [:]
        var value: Node?

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            let box: ObjectBox
            if case .object(let existing)? = value {
                box = existing
            } else {
                box = ObjectBox()
                value = .object(box)
            }
            return KeyedEncodingContainer(Keyed<Key>(box: box))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            let box: ArrayBox
            if case .array(let existing)? = value {
                box = existing
            } else {
                box = ArrayBox()
                value = .array(box)
            }
            return Unkeyed(box: box)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer { Single(encoder: self) }
    }

    struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let box: ObjectBox
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws { box.set(key.stringValue, .null) }
        mutating func encode(_ value: Bool, forKey key: Key) throws { box.set(key.stringValue, .bool(value)) }
        mutating func encode(_ value: String, forKey key: Key) throws { box.set(key.stringValue, .string(value)) }
        mutating func encode(_ value: Double, forKey key: Key) throws { throw SortedJSONEncoder.unsupported("Double") }
        mutating func encode(_ value: Float, forKey key: Key) throws { throw SortedJSONEncoder.unsupported("Float") }
        mutating func encode(_ value: Int, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: Int8, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: Int16, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: Int32, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: Int64, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: UInt, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: UInt8, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: UInt16, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: UInt32, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode(_ value: UInt64, forKey key: Key) throws { box.set(key.stringValue, .number(String(value))) }
        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { box.set(key.stringValue, try SortedJSONEncoder.node(value)) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            let nested = ObjectBox()
            box.set(key.stringValue, .object(nested))
            return KeyedEncodingContainer(Keyed<NestedKey>(box: nested))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            let nested = ArrayBox()
            box.set(key.stringValue, .array(nested))
            return Unkeyed(box: nested)
        }

        mutating func superEncoder() -> any Encoder { Refusing() }
        mutating func superEncoder(forKey key: Key) -> any Encoder { Refusing() }
    }

    struct Unkeyed: UnkeyedEncodingContainer {
        let box: ArrayBox
        var codingPath: [any CodingKey] { [] }
        var count: Int { box.items.count }

        mutating func encodeNil() throws { box.items.append(.null) }
        mutating func encode(_ value: Bool) throws { box.items.append(.bool(value)) }
        mutating func encode(_ value: String) throws { box.items.append(.string(value)) }
        mutating func encode(_ value: Double) throws { throw SortedJSONEncoder.unsupported("Double") }
        mutating func encode(_ value: Float) throws { throw SortedJSONEncoder.unsupported("Float") }
        mutating func encode(_ value: Int) throws { box.items.append(.number(String(value))) }
        mutating func encode(_ value: Int64) throws { box.items.append(.number(String(value))) }
        mutating func encode(_ value: UInt64) throws { box.items.append(.number(String(value))) }
        mutating func encode<T: Encodable>(_ value: T) throws { box.items.append(try SortedJSONEncoder.node(value)) }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            let nested = ObjectBox()
            box.items.append(.object(nested))
            return KeyedEncodingContainer(Keyed<NestedKey>(box: nested))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            let nested = ArrayBox()
            box.items.append(.array(nested))
            return Unkeyed(box: nested)
        }

        mutating func superEncoder() -> any Encoder { Refusing() }
    }

    struct Single: SingleValueEncodingContainer {
        let encoder: TreeEncoder
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil() throws { encoder.value = .null }
        mutating func encode(_ value: Bool) throws { encoder.value = .bool(value) }
        mutating func encode(_ value: String) throws { encoder.value = .string(value) }
        mutating func encode(_ value: Double) throws { throw SortedJSONEncoder.unsupported("Double") }
        mutating func encode(_ value: Float) throws { throw SortedJSONEncoder.unsupported("Float") }
        mutating func encode(_ value: Int) throws { encoder.value = .number(String(value)) }
        mutating func encode(_ value: Int64) throws { encoder.value = .number(String(value)) }
        mutating func encode(_ value: UInt64) throws { encoder.value = .number(String(value)) }
        mutating func encode<T: Encodable>(_ value: T) throws { encoder.value = try SortedJSONEncoder.node(value) }
    }

    /// A super encoder: its values would be lost here, so any use of it fails the encoding.
    struct Refusing: Encoder {
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }
        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Keyed<Key>(box: ObjectBox()))
        }
        func unkeyedContainer() -> any UnkeyedEncodingContainer { Unkeyed(box: ArrayBox()) }
        func singleValueContainer() -> any SingleValueEncodingContainer { Single(encoder: TreeEncoder()) }
    }

    // MARK: Writing

    static func write(_ node: Node, to out: inout [UInt8]) {
        switch node {
        case .string(let text): quote(text, to: &out)
        case .number(let digits): out += digits.utf8
        case .bool(let flag): out += (flag ? "true" : "false").utf8
        case .null: out += "null".utf8
        case .array(let box):
            out.append(UInt8(ascii: "["))
            for (index, item) in box.items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(item, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let box):
            out.append(UInt8(ascii: "{"))
            let members = box.members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                quote(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// A JSON string as JSONEncoder writes it with `.withoutEscapingSlashes`: `\" \\ \b \f \n \r \t`
    /// by name, other control characters as `\u00xx` (lowercase hex), everything else as its UTF-8.
    static func quote(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                start = index + 1
                switch byte {
                case UInt8(ascii: "\""): out += #"\""#.utf8
                case UInt8(ascii: "\\"): out += #"\\"#.utf8
                case 0x08: out += #"\b"#.utf8
                case 0x0C: out += #"\f"#.utf8
                case 0x0A: out += #"\n"#.utf8
                case 0x0D: out += #"\r"#.utf8
                case 0x09: out += #"\t"#.utf8
                default:
                    out += #"\u00"#.utf8
                    out.append(hex[Int(byte >> 4)])
                    out.append(hex[Int(byte & 15)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}
