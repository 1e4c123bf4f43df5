import Foundation
import StoreBus
import StoreBusStorage

/// A JSON object put together a member at a time, for the answers of `POST /verifyReceipt`, and
/// written with its keys in byte order. Foundation's JSONSerialization took about three quarters of
/// those answers' CPU (sorting keys with a locale-aware compare, boxing every value): the fast path
/// (``json``) writes the bytes itself; the plain one (``foundationObject`` through JSONSerialization,
/// `STOREBUS_FAST_PATHS=off`) is its twin, and `AppleJSONTests` holds them equal.
struct JSONObjectWriter {
    /// A member's value.
    indirect enum Value {
        case string(String)
        case number(Int)
        case bool(Bool)
        case object(JSONObjectWriter)
        case objects([JSONObjectWriter])
        /// A value whose JSON is written already (the purchases of a verifyReceipt answer).
        case written([UInt8])
    }

    private(set) var members: [(key: String, value: Value)] = []

    init() {}

    /// A string member.
    mutating func set(_ key: String, _ value: String) { members.append((key, .string(value))) }
    /// A number member.
    mutating func set(_ key: String, _ value: Int) { members.append((key, .number(value))) }
    /// A boolean member.
    mutating func set(_ key: String, _ value: Bool) { members.append((key, .bool(value))) }
    /// An object member.
    mutating func set(_ key: String, _ object: JSONObjectWriter) { members.append((key, .object(object))) }
    /// An array of objects.
    mutating func set(_ key: String, _ objects: [JSONObjectWriter]) { members.append((key, .objects(objects))) }
    /// A member whose value's JSON is written already.
    mutating func set(_ key: String, written json: [UInt8]) { members.append((key, .written(json))) }

    /// The answer's body: the fast path's bytes, or JSONSerialization's with fast paths off.
    var body: [UInt8] {
        guard FastPaths.enabled else {
            let data = try? JSONSerialization.data(withJSONObject: foundationObject, options: [.sortedKeys, .withoutEscapingSlashes])
            return Array(data ?? Data(#"{"status":21005}"#.utf8))
        }
        return json
    }

    /// The object's JSON, written directly.
    var json: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    /// The members in byte order of their keys; of a key set twice, the last.
    private var sortedMembers: [(key: String, value: Value)] {
        // Objects written in order (each in-app purchase's) are taken as they are.
        if members.indices.dropFirst().allSatisfy({ members[$0 - 1].key.utf8.lexicographicallyPrecedes(members[$0].key.utf8) }) { return members }
        let sorted = members.enumerated().sorted { a, b in
            a.element.key == b.element.key ? a.offset < b.offset : a.element.key.utf8.lexicographicallyPrecedes(b.element.key.utf8)
        }
        return sorted.indices.filter { $0 + 1 == sorted.count || sorted[$0 + 1].element.key != sorted[$0].element.key }.map { sorted[$0].element }
    }

    /// Appends the object's JSON to `out`.
    func write(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (index, member) in sortedMembers.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONText.appendQuoted(member.key, to: &out)
            out.append(UInt8(ascii: ":"))
            switch member.value {
            case .string(let text): JSONText.appendQuoted(text, to: &out)
            case .number(let number): out += String(number).utf8
            case .bool(let flag): out += (flag ? "true" : "false").utf8
            case .object(let object): object.write(to: &out)
            case .objects(let objects):
                out.append(UInt8(ascii: "["))
                for (index, object) in objects.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    object.write(to: &out)
                }
                out.append(UInt8(ascii: "]"))
            case .written(let json): out += json
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    /// The same object as Foundation's JSON objects (the plain path).
    var foundationObject: [String: Any] {
        var object: [String: Any] = [:]
        for (key, value) in members {
            switch value {
            case .string(let text): object[key] = text
            case .number(let number): object[key] = number
            case .bool(let flag): object[key] = flag
            case .object(let nested): object[key] = nested.foundationObject
            case .objects(let nested): object[key] = nested.map(\.foundationObject)
            case .written(let json): object[key] = try? JSONSerialization.jsonObject(with: Data(json), options: .fragmentsAllowed)
            }
        }
        return object
    }
}
