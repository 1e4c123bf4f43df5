import Foundation
import StoreBusTesting
import StoreSchema
import Testing

@testable import StoreBus

/// Download.ReadChunk's answers written and read directly (the fast path) against swift-protobuf's
/// JSON (its plain twin), byte for byte. Kept small: swift-protobuf's base64 in a debug build is
/// slow, and a test that holds the cooperative pool's threads for seconds starves the deadline
/// tests of its process (scripts/run-tests).
struct ReadChunkJSONTests {
    /// A random answer: each field at its default now and then, strings sometimes needing escapes.
    static func answer(using random: inout SeededRandom) -> Storebus_Download_V1_ReadChunkResponse {
        func maybe<T>(_ value: T, _ otherwise: T) -> T { Bool.random(using: &random) || Int.random(in: 0..<4, using: &random) > 0 ? value : otherwise }
        func hex() -> String { String((0..<64).map { _ in "0123456789abcdef".randomElement(using: &random)! }) }
        let length = [0, 1, 2, 3, 4, 5, 255, 256, 257, 3_000].randomElement(using: &random)!
        return .with {
            $0.data = Data((0..<length).map { _ in UInt8.random(in: 0...255, using: &random) })
            $0.chunkSha256 = maybe(hex(), "")
            $0.offset = maybe(Int64.random(in: 0...Int64.max, using: &random), 0)
            $0.version = maybe(["1.0", "2.10.3", "0", "1.0\"quoted", "tab\there", "é"].randomElement(using: &random)!, "")
            $0.contentLength = maybe(Int64.random(in: 0...(1 << 40), using: &random), 0)
            $0.sha256 = maybe(hex(), "")
            $0.eof = Bool.random(using: &random)
            $0.dataFrame = Bool.random(using: &random)
            $0.piecesSha256 = maybe(hex(), "")
            $0.pieceBytes = maybe(UInt32.random(in: 1...UInt32.max, using: &random), 0)
        }
    }

    @Test("300 random answers: written as swift-protobuf writes them, read back as swift-protobuf reads them")
    func sameAsSwiftProtobuf() async throws {
        // On a thread of its own: seconds of swift-protobuf in a debug build would otherwise hold a
        // thread of the cooperative pool the deadline tests of this process wait on.
        let mismatches = try await onThread("read-chunk-json") { () throws -> [String] in
            var random = SeededRandom(seed: 20_261_129)
            var mismatches: [String] = []
            for index in 0..<300 {
                let answer = Self.answer(using: &random)
                let plain: [UInt8] = try JSONCodec.encode(answer)
                var rest = answer
                rest.data = .init()
                var same = ReadChunkJSON.encode(answer, direct: true) == plain
                same = same && ReadChunkJSON.encode(rest, data: [UInt8](answer.data), direct: true) == plain
                same = same && ReadChunkJSON.encode(answer, direct: false) == plain
                for direct in [true, false] {
                    let (read, data) = try ReadChunkJSON.decode(plain, direct: direct)
                    same = same && read == rest && data == [UInt8](answer.data)
                }
                // The codec reads this answer directly (the generated client's path): the message
                // swift-protobuf reads.
                let codec = try JSONCodec.decode(Storebus_Download_V1_ReadChunkResponse.self, from: plain)
                let swiftProtobuf = try JSONCodec.decodePlain(Storebus_Download_V1_ReadChunkResponse.self, from: plain)
                same = same && codec == answer && swiftProtobuf == answer
                if !same { mismatches.append("answer \(index): \(String(decoding: plain.prefix(300), as: UTF8.self))") }
            }
            return mismatches
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(3))")
    }

    @Test("answers in another shape are read as swift-protobuf reads them (URL-safe or unpadded base64, escapes, spaces, members in another order), and damaged ones refused as it refuses them")
    func otherShapes() throws {
        let texts = [
            #"{"data":"-_8-ABA=","chunkSha256":"ab","offset":"7"}"#,
            #"{"data":"+/8+ABA","chunkSha256":"ab","offset":"7"}"#,
            #"{ "offset" : 7 , "chunkSha256" : "\u0061b", "data" : "+/8+ABA=" }"#,
            #"{"chunkSha256":"ab","data":"+/8+\nABA=","offset":"7"}"#,
            #"{"data":"+/8+AB=A"}"#, #"{"data":"+/8+A==="}"#, #"{"data":"+/8+AB"}"#, #"{"data":"+/8*ABA="}"#, #"{"data":"+/8+ABA=""#, #"{"data":12}"#, #"{"data":"+/8+ABA=","data":"AA=="}"#
        ]
        var accepted = 0
        for text in texts {
            let json = Array(text.utf8)
            // The codec's reading (directly, a fast path) accepts and refuses as swift-protobuf's.
            let codec = try? JSONCodec.decode(Storebus_Download_V1_ReadChunkResponse.self, from: json)
            if let plain = try? JSONCodec.decodePlain(Storebus_Download_V1_ReadChunkResponse.self, from: json) {
                accepted += 1
                #expect(codec == plain, "\(text)")
                let (read, data) = try ReadChunkJSON.decode(json, direct: true)
                var rest = plain
                rest.data = .init()
                #expect(read == rest && data == [UInt8](plain.data), "\(text)")
            } else {
                #expect(codec == nil, "\(text)")
                #expect(throws: (any Error).self, "\(text)") { _ = try ReadChunkJSON.decode(json, direct: true) }
            }
        }
        #expect(accepted >= 3)
    }
}
