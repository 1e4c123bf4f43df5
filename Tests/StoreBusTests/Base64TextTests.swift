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
}
