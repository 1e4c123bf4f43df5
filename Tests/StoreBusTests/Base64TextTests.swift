import Foundation
import StoreBus
import StoreBusTesting
import Testing

struct Base64TextTests {
    @Test("swift-extras-base64's text is Foundation's, padding included, for every length from 0 to 1,100 bytes and a 400 KB receipt's")
    func sameAsFoundation() {
        var random = SeededRandom(seed: 0xBA5E)
        for length in Array(0...1_100) + [400_001] {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let fast = Base64Text.encode(bytes, fast: true)
            #expect(fast == Base64Text.encode(bytes, fast: false), "\(length) bytes")
            #expect(Data(base64Encoded: fast).map(Array.init) == bytes, "\(length) bytes")
        }
    }

    @Test("decoding: swift-extras-base64 accepts what Foundation accepts and gives its bytes; wrapped, damaged, unpadded or empty text gets Foundation's answer")
    func decodesAsFoundation() {
        var random = SeededRandom(seed: 0xDEC0)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \n\r\t.".utf8)
        var accepted = 0
        for round in 0..<6_000 {
            let bytes = (0..<Int.random(in: 0...300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            var text = Array(Data(bytes).base64EncodedString().utf8)
            switch round % 6 {
            case 0: break
            case 1 where !text.isEmpty: text[Int.random(in: 0..<text.count, using: &random)] = alphabet.randomElement(using: &random)!
            case 2 where !text.isEmpty: text.removeLast(Int.random(in: 1...min(3, text.count), using: &random))
            case 3: text.insert(contentsOf: Array("\r\n".utf8), at: Int.random(in: 0...text.count, using: &random))
            case 4: text = (0..<Int.random(in: 0...12, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
            default: text.append(alphabet.randomElement(using: &random)!)
            }
            let string = String(decoding: text, as: UTF8.self)
            let fast = Base64Text.decode(string, fast: true), plain = Base64Text.decode(string, fast: false)
            #expect(fast == plain, "\(string)")
            if plain != nil { accepted += 1 }
        }
        #expect(accepted > 1_000)
    }
}
