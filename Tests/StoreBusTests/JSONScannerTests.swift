import Foundation
import StoreBus
import Testing

/// A random JSON value for JSONSerialization: an integer within ±`integers`, a string of up to
/// `longest` of `characters`, a boolean, null, or (above depth `deepest`) an array or an object of up
/// to three such values.
private func randomJSONValue(depth: Int, deepest: Int, integers: Int, characters: String, longest: Int, using generator: inout SystemRandomNumberGenerator) -> Any {
    switch Int.random(in: 0..<(depth > deepest ? 4 : 6), using: &generator) {
    case 0: return Int.random(in: -integers...integers, using: &generator)
    case 1: return String((0..<Int.random(in: 0...longest, using: &generator)).map { _ in characters.randomElement(using: &generator)! })
    case 2: return Bool.random(using: &generator)
    case 3: return NSNull()
    case 4:
        return (0..<Int.random(in: 0..<4, using: &generator)).map { _ in
            randomJSONValue(depth: depth + 1, deepest: deepest, integers: integers, characters: characters, longest: longest, using: &generator)
        }
    default:
        var object: [String: Any] = [:]
        for index in 0..<Int.random(in: 0..<4, using: &generator) {
            object["k\(index)"] = randomJSONValue(depth: depth + 1, deepest: deepest, integers: integers, characters: characters, longest: longest, using: &generator)
        }
        return object
    }
}

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

    @Test(
        "text that is not one well-formed array is nil, never a partial list",
        arguments: [
            "", "[", "]", "[1,]", "[,1]", "[1 2]", "[1]x", "[1] [2]", "{}", "\"[1]\"", "[01]", "[\"a]", "[{\"a\":}]", "[tru]",
            "[[{\"a\":1]}]", "[{\"a\":[1}]]", "[[1}]", "[{\"a\":1,]}]", "[{\"a\" 1}]", "[{1:2}]"
        ])
    func malformedArrays(source: String) {
        let json = Array(source.utf8)
        #expect(JSONScanner.elements(of: json, in: json.indices) == nil)
    }

    @Test("nesting: a value as deep as maxDepth is taken, one deeper is not; an empty array or object one deeper is, as it holds no value")
    func nestingLimit() {
        func nested(_ count: Int, inner: String) -> [UInt8] {
            Array((String(repeating: "[", count: count) + inner + String(repeating: "]", count: count)).utf8)
        }
        let limit = JSONScanner.maxDepth
        // The outermost array is depth 0, so the value inside n arrays is at depth n.
        #expect(JSONScanner.elements(of: nested(limit, inner: "1"), in: 0..<(2 * limit + 1)) != nil)
        #expect(JSONScanner.elements(of: nested(limit + 1, inner: "1"), in: 0..<(2 * limit + 3)) == nil)
        #expect(JSONScanner.elements(of: nested(limit + 1, inner: ""), in: 0..<(2 * limit + 2)) != nil)
        #expect(JSONScanner.elements(of: nested(limit + 2, inner: ""), in: 0..<(2 * limit + 4)) == nil)
        let objects = Array((String(repeating: "[{\"k\":", count: limit / 2) + "1" + String(repeating: "}]", count: limit / 2)).utf8)
        #expect(JSONScanner.elements(of: objects, in: objects.indices) != nil)
        let deeper = Array((String(repeating: "[{\"k\":", count: limit / 2) + "[1]" + String(repeating: "}]", count: limit / 2)).utf8)
        #expect(JSONScanner.elements(of: deeper, in: deeper.indices) == nil)
    }

    @Test("a range inside a larger text is scanned alone: what lies outside it is never read")
    func rangeWithinText() {
        let json = Array(#"xx[1,[2,3]]yy"#.utf8)
        #expect(JSONScanner.elements(of: json, in: 2..<11)?.map { text($0, in: json) } == ["1", "[2,3]"])
        #expect(JSONScanner.elements(of: json, in: 2..<10) == nil, "cut before the closing bracket")
    }

    @Test(
        "an object's members and, in the same pass, those of one member's object: as two calls find them; nil for the nested list when that member is absent or not an object, nil for all when anything is malformed"
    )
    func nestedMembersInOnePass() throws {
        let json = Array(#"{"seq":"3", "payload" : {"a":[1,{"b":"\"}"}], "c":{"d":null}} ,"time":"x"}"#.utf8)
        let both = try #require(JSONScanner.members(of: json, in: json.indices, andOf: "payload"))
        let plain = try #require(JSONScanner.members(of: json, in: json.indices))
        #expect(both.members.map(\.name) == plain.map(\.name) && both.members.map(\.value) == plain.map(\.value))
        let payload = try #require(plain.first { $0.name == "payload" }?.value)
        let nested = try #require(JSONScanner.members(of: json, in: payload))
        #expect(both.nested?.map(\.name) == nested.map(\.name) && both.nested?.map(\.value) == nested.map(\.value))
        #expect(both.nested?.map(\.name) == ["a", "c"])
        #expect(JSONScanner.members(of: json, in: json.indices, andOf: "time")?.nested == nil, "a string, not an object")
        #expect(JSONScanner.members(of: json, in: json.indices, andOf: "absent")?.nested == nil)
        #expect(JSONScanner.members(of: json, in: json.indices, andOf: "absent")?.members.count == 3)
        let twice = Array(#"{"p":{"x":1},"p":{"y":2}}"#.utf8)
        #expect(JSONScanner.members(of: twice, in: twice.indices, andOf: "p")?.nested?.map(\.name) == ["y"])
        for broken in [#"{"p":{"x":}}"#, #"{"p":{"x":1}"#, #"{"p":{"x":1},}"#, #"{"p":{"x\":1}}"#, #"{"p":{"x":"\q"}}"#] {
            let text = Array(broken.utf8)
            #expect(JSONScanner.members(of: text, in: text.indices, andOf: "p") == nil, "\(broken)")
        }
        // Deeper than the scanner's limit inside the nested object: refused as by skipping it.
        let deep = Array(("{\"p\":{\"q\":" + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}}").utf8)
        #expect(JSONScanner.members(of: deep, in: deep.indices) == nil)
        #expect(JSONScanner.members(of: deep, in: deep.indices, andOf: "p") == nil)
    }

    @Test("an array of objects: each element's members in one pass, as elements then members find them; nil when an element is not an object or anything is malformed")
    func objectsOfAnArray() throws {
        let json = Array(#" [ {"a":1,"b":{"c":[2]}} , {} ,{"d":"\"x"} ] "#.utf8)
        let objects = try #require(JSONScanner.objects(of: json, in: json.indices))
        let elements = try #require(JSONScanner.elements(of: json, in: json.indices))
        #expect(objects.count == elements.count)
        for (object, element) in zip(objects, elements) {
            let members = try #require(JSONScanner.members(of: json, in: element))
            #expect(object.map(\.name) == members.map(\.name) && object.map(\.value) == members.map(\.value))
        }
        #expect(JSONScanner.objects(of: Array(" [ ] ".utf8), in: 0..<5)?.isEmpty == true)
        for broken in ["[1]", #"[{},"x"]"#, "[{}", "[{},]", #"[{"a":}]"#, #"[{"a\"b":1}]"#, "{}", "[{}] x"] {
            let text = Array(broken.utf8)
            #expect(JSONScanner.objects(of: text, in: text.indices) == nil, "\(broken)")
        }
    }

    @Test("named values: for each name, the value members finds last under it, nil when absent; of each object of an array as well; nil for text members and objects refuse")
    func namedValues() throws {
        let names = ["b", "absent", "a", "d"].map { Array($0.utf8) }
        let samples = [
            #"{"a":1,"b":{"c":[2]},"a":"x","eé":null}"#, #" { } "#, #"{"d":[{"b":1}],"b":"\"}"}"#, #"{"ab":1,"":2,"a":3}"#
        ]
        for sample in samples {
            let json = Array(sample.utf8)
            let members = try #require(JSONScanner.members(of: json, in: json.indices), "\(sample)")
            let values = try #require(JSONScanner.values(of: json, in: json.indices, named: names), "\(sample)")
            let expected = names.map { name in members.last { Array($0.name.utf8) == name }?.value }
            #expect(values == expected, "\(sample)")
        }
        let array = Array(("[" + samples.joined(separator: ",") + "]").utf8)
        let objects = try #require(JSONScanner.objects(of: array, in: array.indices))
        let picked = try #require(JSONScanner.objectValues(of: array, in: array.indices, named: names))
        #expect(picked == objects.map { members in names.map { name in members.last { Array($0.name.utf8) == name }?.value } })
        #expect(JSONScanner.objectValues(of: Array(" [ ] ".utf8), in: 0..<5, named: names)?.isEmpty == true)
        for broken in [#"{"a":}"#, #"{"a":1"#, #"{"a":1,}"#, #"{"a\"b":1}"#, #"{"a":"\q"}"#, "[]", "{} x"] {
            let text = Array(broken.utf8)
            #expect(JSONScanner.values(of: text, in: text.indices, named: names) == nil, "\(broken)")
            let inArray = Array("[\(broken)]".utf8)
            #expect(JSONScanner.objectValues(of: inArray, in: inArray.indices, named: names) == nil, "\(broken)")
        }
    }

    @Test("strings: escapes, raw control characters and unterminated strings, at every position of a run of plain bytes")
    func stringsAtEveryPosition() {
        // Lengths past two eight-byte words: the plain bytes are stepped over a word at a time.
        for length in 0..<26 {
            for position in 0...length {
                var plain = Array(repeating: UInt8(ascii: "a"), count: length)
                #expect(JSONScanner.elements(of: Array(("[\"" + String(decoding: plain, as: UTF8.self) + "\"]").utf8), in: 0..<(length + 4)) != nil)
                for (insert, valid) in [
                    ("\\n", true), ("\\\\", true), ("\\u00e9", true), ("\\u00g9", false), ("\\x", false), ("\u{1}", false), ("\u{1f}", false), ("\"", false), (" ", true), ("!", true),
                    ("\u{7f}", true), ("é", true)
                ] {
                    plain = Array(repeating: UInt8(ascii: "a"), count: length)
                    plain.insert(contentsOf: Array(insert.utf8), at: position)
                    let json = Array("[\"".utf8) + plain + Array("\"]".utf8)
                    #expect((JSONScanner.elements(of: json, in: json.indices) != nil) == valid, "\(String(decoding: json, as: UTF8.self))")
                }
                let open = Array("[\"".utf8) + Array(repeating: UInt8(ascii: "a"), count: length)
                #expect(JSONScanner.elements(of: open, in: open.indices) == nil, "unterminated")
            }
        }
    }

    @Test("3,000 random arrays with one byte changed, inserted or removed: taken exactly when JSONSerialization takes them as an array")
    func mutatedArrays() throws {
        var generator = SystemRandomNumberGenerator()
        func value(_ depth: Int) -> Any {
            randomJSONValue(depth: depth, deepest: 4, integers: 1_000, characters: "ab\"\\ \n", longest: 5, using: &generator)
        }
        // Bytes that make and break structure. No "e" (an exponent made of a changed integer can
        // overflow a Double, which JSONSerialization refuses) and no "u" after a backslash (an
        // escape naming half a surrogate pair, which it refuses too): the scanner takes both.
        let replacements = Array(#"[]{}:,"\ 0123456789-+.trflasn"#.utf8)
        var refused = 0
        for _ in 0..<3_000 {
            let array = (0..<Int.random(in: 1..<5, using: &generator)).map { _ in value(0) }
            var json = Array(try JSONSerialization.data(withJSONObject: array, options: Bool.random(using: &generator) ? [.prettyPrinted] : []))
            let position = Int.random(in: 0..<json.count, using: &generator)
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: json[position] = replacements.randomElement(using: &generator)!
            case 1: json.insert(replacements.randomElement(using: &generator)!, at: position)
            default: json.remove(at: position)
            }
            let text = String(decoding: json, as: UTF8.self)
            // Foundation also takes a comma before a closing bracket, which JSON does not.
            if text.contains("\\u") || text.contains(/,\s*[\]}]/) { continue }
            let serialization = (try? JSONSerialization.jsonObject(with: Data(json), options: [])) is [Any]
            let scanner = JSONScanner.elements(of: json, in: json.indices) != nil
            #expect(scanner == serialization, "\(text)")
            if !scanner { refused += 1 }
        }
        #expect(refused > 500, "most changes break the text: \(refused) refused")
    }

    @Test("1,000 random arrays: each element range holds exactly that element, as JSONSerialization reads it")
    func randomArrays() throws {
        var generator = SystemRandomNumberGenerator()
        func value(_ depth: Int) -> Any {
            randomJSONValue(depth: depth, deepest: 3, integers: 1_000_000, characters: "a\"\\\n\u{1}é😀 ", longest: 7, using: &generator)
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
