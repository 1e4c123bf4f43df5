import Foundation
import StoreBusTesting
import Testing

@testable import StoreBusStorage

@Suite("Hand-written JSON text of the event log")
struct JSONTextTests {
    @Test(
        "timestamps read as RFC 3339 UTC with milliseconds, as Foundation writes them",
        arguments: [
            (Int64(0), "1970-01-01T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_709_208_000_123, "2024-02-29T12:00:00.123Z"),
            (1_795_222_923_456, "2026-11-21T01:02:03.456Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z")
        ])
    func fixedTimestamps(milliseconds: Int64, expected: String) {
        #expect(Self.timestampText(milliseconds) == expected)
    }

    @Test("10,000 random instants between 1900 and 9999 agree with ISO8601DateFormatter")
    func randomTimestamps() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var random = SeededRandom(seed: 0x7131_E5)
        for _ in 0..<10_000 {
            let milliseconds = Int64.random(in: -2_208_988_800_000...253_402_300_799_999, using: &random)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(Self.timestampText(milliseconds) == formatter.string(from: date), "\(milliseconds)")
        }
    }

    @Test("strings are quoted with JSON escapes")
    func quoted() {
        #expect(Self.quotedText("plain") == "\"plain\"")
        #expect(Self.quotedText("com.app|ünï|日本🎉") == "\"com.app|ünï|日本🎉\"")
        #expect(Self.quotedText("a\"b\\c\nd\te\u{01}") == "\"a\\\"b\\\\c\\nd\\te\\u0001\"")
    }

    static func timestampText(_ milliseconds: Int64) -> String {
        var text: [UInt8] = []
        JSONText.appendMillisecondTimestamp(milliseconds, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    static func quotedText(_ text: String) -> String {
        var out: [UInt8] = []
        JSONText.appendQuoted(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    @Test("the word-at-a-time scan for bytes that need an escape answers as the byte-by-byte one: every byte value at every place of 0 to 40 plain bytes, and 20,000 random texts")
    func wordwiseScan() {
        func same(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBufferPointer { JSONText.anyNeedsScan($0, wordwise: true) == JSONText.anyNeedsScan($0, wordwise: false) }
        }
        let plain = Array("QUJD+/0123456789abcdefghijklmnopqrstuvwxyz".utf8)
        for length in 0...40 {
            #expect(same(Array(plain.prefix(length))))
            for place in 0..<length {
                for value in 0...255 {
                    var bytes = Array(plain.prefix(length))
                    bytes[place] = UInt8(value)
                    #expect(same(bytes), "\(value) at \(place) of \(length)")
                }
            }
        }
        var random = SeededRandom(seed: 0x5CA9)
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...64, using: &random)
            // Mostly plain ASCII, with sometimes a byte of any value
            let bytes = (0..<length).map { _ in Int.random(in: 0..<20, using: &random) == 0 ? UInt8.random(in: 0...255, using: &random) : UInt8.random(in: 0x23...0x5B, using: &random) }
            #expect(same(bytes))
        }
        // The scan finds them in a long text too, wherever they are
        var long = [UInt8](repeating: UInt8(ascii: "A"), count: 500_003)
        long.withUnsafeBufferPointer { #expect(!JSONText.anyNeedsScan($0, wordwise: true)) }
        for (place, value) in [(0, 0x22), (499_999, 0x5C), (500_002, 0x7F), (250_001, 0xC2), (7, 0x1F)] {
            long[place] = UInt8(value)
            long.withUnsafeBufferPointer { #expect(JSONText.anyNeedsScan($0, wordwise: true)) }
            long[place] = UInt8(ascii: "A")
        }
    }
}
