import Foundation
import StoreBus
import Testing

@Suite("JSON scanner: members and elements without decoding")
struct JSONScannerTests {
    private func text(_ range: Range<Int>, in json: [UInt8]) -> String {
        String(decoding: json[range], as: UTF8.self)
    }

    @Test("an answer's members, an array's elements and a member's value, whitespace around them allowed")
    func membersAndElements() throws {
        let json = Array(#" { "events" : [ {"seq":"7","removedTransactions":{"transactions":[{"transactionIdentifier":"t1"}]}} , {"seq":"8"} ] , "headSeq":"8" } "#.utf8)
        let members = try #require(JSONScanner.members(of: json, in: json.indices))
        #expect(members.map(\.name) == ["events", "headSeq"])
        let events = try #require(JSONScanner.member("events", of: json, in: json.indices))
        let elements = try #require(JSONScanner.elements(of: json, in: events))
        #expect(elements.map { text($0, in: json) } == [#"{"seq":"7","removedTransactions":{"transactions":[{"transactionIdentifier":"t1"}]}}"#, #"{"seq":"8"}"#])
        #expect(JSONScanner.member("seq", of: json, in: elements[1]).flatMap { JSONScanner.unsigned(json, $0) } == 8)
        #expect(JSONScanner.member("absent", of: json, in: json.indices) == nil)
        #expect(JSONScanner.elements(of: Array("[]".utf8), in: 0..<2) == [])
        #expect(JSONScanner.elements(of: Array(" [ ] ".utf8), in: 0..<5) == [])
        let scalars = Array(#"[1,-2.5e3,"a\"b",true,null,[],{}]"#.utf8)
        #expect(JSONScanner.elements(of: scalars, in: scalars.indices)?.map { text($0, in: scalars) } == ["1", "-2.5e3", #""a\"b""#, "true", "null", "[]", "{}"])
    }

    @Test("text that is not one well-formed array is nil, never a partial list", arguments: [
        "", "[", "]", "[1,]", "[,1]", "[1 2]", "[1]x", "[1] [2]", "{}", "\"[1]\"", "[01]", "[\"a]", "[{\"a\":}]", "[tru]",
    ])
    func malformedArrays(source: String) {
        let json = Array(source.utf8)
        #expect(JSONScanner.elements(of: json, in: json.indices) == nil)
    }

    @Test("a range inside a larger text is scanned alone: what lies outside it is never read")
    func rangeWithinText() {
        let json = Array(#"xx[1,[2,3]]yy"#.utf8)
        #expect(JSONScanner.elements(of: json, in: 2..<11)?.map { text($0, in: json) } == ["1", "[2,3]"])
        #expect(JSONScanner.elements(of: json, in: 2..<10) == nil, "cut before the closing bracket")
    }

    @Test("1,000 random arrays: each element range holds exactly that element, as JSONSerialization reads it")
    func randomArrays() throws {
        var generator = SystemRandomNumberGenerator()
        func value(_ depth: Int) -> Any {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
            case 0: return Int.random(in: -1_000_000...1_000_000, using: &generator)
            case 1: return String((0..<Int.random(in: 0..<8, using: &generator)).map { _ in "a\"\\\n\u{1}é😀 ".randomElement(using: &generator)! })
            case 2: return Bool.random(using: &generator)
            case 3: return NSNull()
            case 4: return (0..<Int.random(in: 0..<4, using: &generator)).map { _ in value(depth + 1) }
            default:
                var object: [String: Any] = [:]
                for index in 0..<Int.random(in: 0..<4, using: &generator) { object["k\(index)"] = value(depth + 1) }
                return object
            }
        }
        func canonical(_ value: Any) throws -> Data {
            try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed])
        }
        for _ in 0..<1_000 {
            let array = (0..<Int.random(in: 0..<6, using: &generator)).map { _ in value(0) }
            let json = Array(try JSONSerialization.data(withJSONObject: array, options: [.prettyPrinted]))
            let ranges = try #require(JSONScanner.elements(of: json, in: json.indices), "\(String(decoding: json, as: UTF8.self))")
            #expect(ranges.count == array.count)
            for (range, element) in zip(ranges, array) {
                let read = try JSONSerialization.jsonObject(with: Data(json[range]), options: .fragmentsAllowed)
                #expect(try canonical(read) == canonical(element))
            }
        }
    }
}
