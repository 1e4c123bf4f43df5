import SwiftProtobuf

/// A message's proto3 JSON object written member by member, as swift-protobuf writes it: names in
/// lowerCamelCase, members in field order, defaults left out, enums by name, 64-bit integers and
/// timestamps as strings. The writers that use it (the payment queue's transactions, the receipt
/// service's VerifyReceipt answer) give up, returning false, on what they do not write exactly, and
/// their callers then ask swift-protobuf; their tests hold them to swift-protobuf's bytes.
public struct ProtoJSONObject {
    /// The JSON written so far.
    public var out: [UInt8]
    private var first = true

    init(out: [UInt8]) {
        self.out = out
    }

    /// Writes one object to `out`, its members by `body`; false, with `out` left partly written, when
    /// the message has unknown fields or `body` gives up (the object is then not one written exactly
    /// here, and the caller cuts `out` back).
    public static func write(_ unknownFields: UnknownStorage, to out: inout [UInt8], _ body: (inout ProtoJSONObject) -> Bool) -> Bool {
        guard unknownFields.data.isEmpty else { return false }
        var object = ProtoJSONObject(out: [])
        swap(&object.out, &out)
        // Whatever happens, `out` gets what was written (the caller cuts it back on failure).
        defer { out = object.out }
        guard body(&object) else { return false }
        object.close()
        return true
    }

    /// A member's name, after a comma unless it is the first.
    public mutating func name(_ name: StaticString) {
        out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
        first = false
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        out.append(UInt8(ascii: "\""))
        out.append(UInt8(ascii: ":"))
    }

    /// A string member (left out when empty).
    public mutating func string(_ name: StaticString, _ value: String) {
        guard !value.isEmpty else { return }
        self.name(name)
        JSONText.appendQuoted(value, to: &out)
    }

    /// A boolean member (left out when false).
    public mutating func bool(_ name: StaticString, _ value: Bool) {
        guard value else { return }
        self.name(name)
        out += Array("true".utf8)
    }

    /// A 32-bit integer member (left out when 0).
    public mutating func int32(_ name: StaticString, _ value: Int32) {
        guard value != 0 else { return }
        self.name(name)
        out += Array(String(value).utf8)
    }

    /// An enum by name (left out when 0); false for a value without one.
    public mutating func enumeration(_ name: StaticString, _ value: Int, names: [Int: [UInt8]]) -> Bool {
        guard value != 0 else { return true }
        guard let text = names[value] else { return false }
        self.name(name)
        out += text
        return true
    }

    /// A timestamp member (left out when nil); false for one proto3 JSON cannot write.
    public mutating func timestamp(_ name: StaticString, _ value: Google_Protobuf_Timestamp?) -> Bool {
        guard let value else { return true }
        self.name(name)
        return JSONText.appendTimestamp(seconds: value.seconds, nanos: value.nanos, to: &out)
    }

    /// A message member, written by `body` (false: not written here).
    public mutating func message(_ name: StaticString, _ body: (inout [UInt8]) -> Bool) -> Bool {
        self.name(name)
        return body(&out)
    }

    /// A repeated message member (left out when empty), each element written by `body`.
    public mutating func messages<Element>(_ name: StaticString, _ elements: [Element], _ body: (Element, inout [UInt8]) -> Bool) -> Bool {
        guard !elements.isEmpty else { return true }
        self.name(name)
        out.append(UInt8(ascii: "["))
        for (index, element) in elements.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            guard body(element, &out) else { return false }
        }
        out.append(UInt8(ascii: "]"))
        return true
    }

    /// Ends the object (`{}` when it has no member).
    mutating func close() {
        if first { out.append(UInt8(ascii: "{")) }
        out.append(UInt8(ascii: "}"))
    }
}
