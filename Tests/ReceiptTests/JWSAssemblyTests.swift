import Crypto
import Foundation
import Receipt
import StoreBusTesting
import StoreSchema
import Testing
import X509

@testable import ReceiptFormat

/// A JWS put together in one buffer from the header's hash state (the fast path) against its plain
/// twin, strings concatenated and the whole input hashed: the same header and payload segments, and
/// both signatures good, for the payloads StoreBus signs with any fields set.
@Suite("JWS put together in one buffer")
struct JWSAssemblyTests {
    /// The input a JWS's signature covers, its signature's bytes, and its three segments.
    static func parts(_ jws: String) throws -> (input: Data, signature: [UInt8], segments: [String]) {
        let segments = jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(segments.count == 3, "\(jws.prefix(80))")
        let signature = try #require(Base64URL.decode(segments[2]))
        return (Data((segments[0] + "." + segments[1]).utf8), signature, segments)
    }

    static func check<T: Codable & Equatable>(_ type: T.Type, blank: T, count: Int, key: SigningKey, root: Certificate) async throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<count {
            var object = SortedJSONEncoderTests.randomObject(like: blank, &generator)
            // What JWS.verify judges the chain at: a time inside the certificates' validity.
            object["signedDate"] = EpochMilliseconds.now
            let value = try JSONDecoder().decode(T.self, from: JSONSerialization.data(withJSONObject: object))
            let fast = try JWS.sign(value, with: key, written: true)
            let plain = try JWS.sign(value, with: key, written: false)
            let (fastInput, fastSignature, fastSegments) = try parts(fast)
            let (plainInput, _, plainSegments) = try parts(plain)
            #expect(fastSegments[0] == plainSegments[0], "header")
            #expect(fastSegments[1] == plainSegments[1], "payload")
            #expect(fastInput == plainInput)
            // The signature checked by swift-crypto over the whole input, hashed from the start.
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: fastSignature)
            let publicKey = try #require(P256.Signing.PublicKey(key.certificate.publicKey))
            #expect(publicKey.isValidSignature(signature, for: fastInput))
            #expect(try await JWS.verify(fast, as: T.self, roots: [root]) == value)
            #expect(try await JWS.verify(plain, as: T.self, roots: [root]) == value)
        }
    }

    /// Runs `body` with the current key of a new signing authority, and its root.
    static func withKey(_ body: (SigningKey, Certificate) async throws -> Void) async throws {
        let directory = try TemporaryDirectory(prefix: "jws-assembly")
        defer { directory.remove() }
        let authority = try SigningAuthority(directory: directory.url)
        try await body(try authority.current(), authority.root)
    }

    @Test("signed transactions, renewal infos and notifications: the plain twin's segments, a good signature")
    func sameSegments() async throws {
        try await Self.withKey { key, root in
            try await Self.check(JWSTransactionDecodedPayload.self, blank: JWSTransactionDecodedPayload(), count: 150, key: key, root: root)
            try await Self.check(JWSRenewalInfoDecodedPayload.self, blank: JWSRenewalInfoDecodedPayload(), count: 150, key: key, root: root)
            try await Self.check(ResponseBodyV2DecodedPayload.self, blank: ResponseBodyV2DecodedPayload(), count: 150, key: key, root: root)
        }
    }

    @Test("the header's hash state is the same for every signature: signatures in parallel all verify")
    func sharedState() async throws {
        try await Self.withKey { key, root in try await Self.signInParallel(key: key, root: root) }
    }

    static func signInParallel(key: SigningKey, root: Certificate) async throws {
        let signed = try await withThrowingTaskGroup(of: (String, String).self) { group in
            for index in 0..<64 {
                group.addTask {
                    var payload = JWSTransactionDecodedPayload()
                    payload.transactionId = String(index)
                    payload.signedDate = EpochMilliseconds.now
                    return (String(index), try JWS.sign(payload, with: key))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(signed.count == 64)
        for (id, jws) in signed {
            let payload = try await JWS.verify(jws, as: JWSTransactionDecodedPayload.self, roots: [root])
            #expect(payload.transactionId == id)
        }
    }
}
