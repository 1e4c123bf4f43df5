import Foundation
import ReceiptFormat
import Testing

/// The JWS payloads' JSON written by `SortedJSONEncoder` against JSONEncoder's (sorted keys, slashes
/// unescaped), its plain twin: byte for byte.
@Suite("JWS payloads written directly")
struct SortedJSONEncoderTests {
    static func plain(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value))
    }

    /// Strings with what JSON must escape, what it need not, and text beyond ASCII.
    static let pieces = ["a", "Z", "0", "/", "\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}", "é", "€", "😀", "\u{2028}", " ", "-", "."]

    static func randomString(_ generator: inout some RandomNumberGenerator) -> String {
        (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    /// A random JSON object for the stored properties of `blank` (a value with every field nil),
    /// each left out half the time; nested payloads made the same way.
    static func randomObject(like blank: Any, _ generator: inout some RandomNumberGenerator) -> [String: Any] {
        var object: [String: Any] = [:]
        for child in Mirror(reflecting: blank).children {
            guard let label = child.label, Bool.random(using: &generator) else { continue }
            switch String(describing: type(of: child.value)) {
            case "Optional<String>": object[label] = randomString(&generator)
            case "Optional<Int>", "Optional<Int64>": object[label] = Int64.random(in: -1_000_000_000_000...Int64.max, using: &generator)
            case "Optional<Bool>": object[label] = Bool.random(using: &generator)
            case "Optional<NotificationData>": object[label] = randomObject(like: NotificationData(), &generator)
            case let other: Issue.record("no random value for \(label) of type \(other)")
            }
        }
        return object
    }

    static func check<T: Codable>(_ type: T.Type, blank: T, count: Int) throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<count {
            let json = try JSONSerialization.data(withJSONObject: randomObject(like: blank, &generator))
            let value = try JSONDecoder().decode(T.self, from: json)
            let written = try SortedJSONEncoder.encode(value)
            let expected = try plain(value)
            #expect(written == expected, "\(String(decoding: written, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
            #expect(try JWS.json(value, written: true) == expected)
            // The payloads StoreBus signs write their own JSON (JWS.json's fast path, checked above
            // too): written without the tree as well.
            let writable = try #require(value as? any SortedJSONWritable, "\(T.self) writes no JSON of its own")
            var own: [UInt8] = []
            writable.writeSortedJSON(to: &own)
            #expect(own == expected, "\(String(decoding: own, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test("signed transactions, renewal infos and notifications with any fields set, any characters in their strings: JSONEncoder's bytes")
    func payloads() throws {
        try Self.check(JWSTransactionDecodedPayload.self, blank: JWSTransactionDecodedPayload(), count: 500)
        try Self.check(JWSRenewalInfoDecodedPayload.self, blank: JWSRenewalInfoDecodedPayload(), count: 500)
        try Self.check(ResponseBodyV2DecodedPayload.self, blank: ResponseBodyV2DecodedPayload(), count: 500)
    }

    struct Odd: Encodable {
        var when = Date(timeIntervalSince1970: 1_800_000_000.5)
        var ratio = 0.25
        var bytes = Data([1, 2, 3])
        var list = ["b", "a"]
        var nested = ["z": 1, "a": 2]
        var nothing: String? = nil
    }

    @Test("a payload with dates, numbers with fractions or data is left to JSONEncoder, which then writes it; arrays and dictionaries are written as JSONEncoder writes them")
    func leftToJSONEncoder() throws {
        #expect(throws: SortedJSONEncoder.Unsupported.self) { _ = try SortedJSONEncoder.encode(Odd()) }
        #expect(try JWS.json(Odd(), written: true) == Self.plain(Odd()))
        struct Plain: Encodable {
            var list = ["b", "a"]
            var nested = ["z": 1, "a": 2]
            var empty: [String: Int] = [:]
            var nothing: String? = nil
            var flag = false
        }
        #expect(try SortedJSONEncoder.encode(Plain()) == Self.plain(Plain()))
    }
}
