import Foundation
import StoreBusTesting
import Testing

@testable import ReceiptFormat

/// JWS's base64url (swift-extras-base64) against Foundation's base64 rewritten by hand, and the
/// byte-wise split of a compact JWS against `String.split`, and DER's set order by `memcmp`
/// against `lexicographicallyPrecedes`.
struct Base64URLTests {
    /// Foundation's base64 of `bytes`, into the URL alphabet, padding dropped.
    static func reference(_ bytes: [UInt8]) -> String {
        String(
            Data(bytes).base64EncodedString().compactMap { character -> Character? in
                switch character {
                case "+": "-"
                case "/": "_"
                case "=": nil
                default: character
                }
            })
    }

    @Test("base64url encodes every length as Foundation's base64 rewritten does, and decodes back; padded or standard-alphabet text is refused")
    func encodesAsFoundation() {
        var random = SeededRandom(seed: 64)
        for length in Array(0..<70) + [255, 256, 257, 4_096, 27_101] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let encoded = Base64URL.encode(bytes)
            #expect(encoded == Self.reference(bytes), "length \(length)")
            #expect(Base64URL.encode(Data(bytes)) == encoded, "length \(length), from Data")
            #expect(Base64URL.decode(encoded) == bytes, "length \(length)")
        }
        #expect(Base64URL.decode("AQ==") == nil)
        #expect(Base64URL.decode("AQ=A") == nil)
        #expect(Base64URL.decode("+/8") == nil)
        #expect(Base64URL.decode("A") == nil)
        #expect(Base64URL.decode("AQ") == [1])
        #expect(Base64URL.decode("") == [])
    }

    @Test("a compact JWS splits into the segments String.split gives, empty ones kept; anything but two dots is refused")
    func splitsOnBytes() {
        for text in ["a.b.c", "..", "a..c", ".b.", "héé.ü\u{301}.x", "eyJ.eyJ.sig"] {
            let expected = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            #expect(JWS.segments(text)?.map(String.init) == expected, "\(text)")
        }
        // A combining mark after a dot makes one Character of the two for String.split; bytes are split.
        #expect(JWS.segments("abc.\u{301}def.ghi")?.map(String.init) == ["abc", "\u{301}def", "ghi"])
        for text in ["", "abc", "a.b", "a.b.c.d", "...", "a.b.c."] {
            #expect(JWS.segments(text) == nil, "\(text)")
        }
        // The payload segment's bytes, for readers that take a JWS's bytes.
        for (text, payload) in [("e30.eyJhIjoxfQ.c2ln", Array(#"{"a":1}"#.utf8)), ("..", nil), ("a.b", nil), ("a.+.c", nil), ("a.AQ.", [1])] {
            #expect(Array(text.utf8).withUnsafeBufferPointer(JWS.unverifiedPayloadBytes) == payload, "\(text)")
        }
    }

    @Test("DER's set order by memcmp is the bytewise order lexicographicallyPrecedes gives, a prefix first")
    func derSetOrder() {
        var random = SeededRandom(seed: 17)
        for _ in 0..<20_000 {
            let prefix = (0..<Int.random(in: 0...12, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let a = prefix + (0..<Int.random(in: 0...3, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            let b = prefix + (0..<Int.random(in: 0...3, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(ReceiptAttribute.derPrecedes(a, b) == a.lexicographicallyPrecedes(b), "\(a) \(b)")
        }
    }

    @Test("a set of encoded elements comes out in the order a plain sort by bytes gives, whatever order they go in")
    func setOfEncodedElements() {
        var random = SeededRandom(seed: 23)
        for _ in 0..<300 {
            let prefix = (0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 0...3, using: &random) }
            let elements = (0..<Int.random(in: 0...60, using: &random)).map { _ in
                prefix + (0..<Int.random(in: 0...4, using: &random)).map { _ in UInt8.random(in: 0...3, using: &random) }
            }
            let sorted = elements.sorted { $0.lexicographicallyPrecedes($1) }
            let content = sorted.flatMap { $0 }
            let set = ReceiptAttribute.setDER(encoded: elements.shuffled(using: &random))
            #expect(set.suffix(content.count).elementsEqual(content), "\(elements)")
            #expect(set.first == 0x31 && set.count - content.count == (content.count < 0x80 ? 2 : content.count < 0x100 ? 3 : 4))
        }
    }
}
