import Foundation
import StoreBus
import StoreSchema
import Testing

@testable import Notifications

/// The notification service's direct reading of SignNotifications' answers against swift-protobuf's,
/// its plain twin (`STOREBUS_FAST_PATHS=off`).
@Suite("SignNotifications answers read directly")
struct SignedPayloadsJSONTests {
    /// What swift-protobuf makes of `body`, or nil when it refuses it.
    static func plain(_ body: [UInt8]) -> Storebus_Receipt_V1_SignNotificationsResponse? {
        try? SignedPayloadsJSON.decode(body, fast: false)
    }

    @Test("1,000 random answers as swift-protobuf writes them are read directly, to the same messages")
    func randomAnswers() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
        for _ in 0..<1_000 {
            let response = Storebus_Receipt_V1_SignNotificationsResponse.with { response in
                response.signedPayloads = (0..<Int.random(in: 0...6, using: &generator)).map { _ in
                    String((0..<Int.random(in: 0...3_000, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
                }
                response.environment = Bool.random(using: &generator) ? "Sandbox" : (Bool.random(using: &generator) ? "Production" : "")
            }
            let body = try JSONCodec.encode(response)
            #expect(SignedPayloadsJSON.read(body) == response)
            #expect(try SignedPayloadsJSON.decode(body) == response)
        }
    }

    @Test("escapes, other members, white space, numbers, nulls, broken or non-UTF-8 JSON: the same answer or the same refusal as swift-protobuf")
    func otherShapes() throws {
        let bodies: [String] = [
            #"{}"#, #" { "signedPayloads" : [ "a.b.c" , "d" ] , "environment" : "Sandbox" } "#, #"{"signedPayloads":["a\"b"]}"#,
            #"{"signedPayloads":["\u0041"]}"#, #"{"signedPayloads":["é"],"environment":"\n"}"#, #"{"signed_payloads":["a"]}"#,
            #"{"signedPayloads":["a"],"extra":1}"#, #"{"signedPayloads":null}"#, #"{"environment":null}"#, #"{"signedPayloads":[1]}"#,
            #"{"signedPayloads":["a"],"signedPayloads":["b"]}"#, #"{"signedPayloads":["a"]"#, #"{"signedPayloads":["a",]}"#, #"[]"#, #""#,
            #"{"signedPayloads":[]}"#, #"{"environment":"Sandbox"}x"#, "{\"signedPayloads\":[\"a\tb\"]}"
        ]
        var all = bodies.map { Array($0.utf8) }
        all.append(Array(#"{"signedPayloads":[""#.utf8) + [0xC3, 0x28] + Array(#""]}"#.utf8))
        for body in all {
            let fast = try? SignedPayloadsJSON.decode(body)
            #expect(fast == Self.plain(body), "\(String(decoding: body, as: UTF8.self))")
            if let read = SignedPayloadsJSON.read(body) {
                #expect(read == Self.plain(body), "read directly: \(String(decoding: body, as: UTF8.self))")
            }
        }
    }
}
