@preconcurrency import Crypto
import Foundation
import StoreBusTesting
import SwiftASN1
import Testing

@testable import Receipt
@testable import ReceiptFormat

/// The fast path for a receipt's signature (``KnownSigners``) accepts only what swift-certificates'
/// CMS check, its plain twin, accepts.
struct KnownSignersTests {
    @Test(
        "a signer is known only once the plain check validated one of its messages; then its receipts of 0 bytes to 300 KB are accepted while their time lies in every certificate's validity, and not with another payload"
    )
    func knownAfterThePlainCheck() async throws {
        let directory = try TemporaryDirectory(prefix: "signers")
        defer { directory.remove() }
        let authority = try SigningAuthority(directory: directory.url)
        let key = try authority.current()
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let known = KnownSigners(roots: [authority.root])
        var random = SeededRandom(seed: 41)
        var first = true
        for size in [0, 1, 127, 128, 255, 256, 65_535, 65_536, 300_000] {
            let payload = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let der = try ReceiptSignature.sign(payload: payload, with: key, at: now)
            #expect(der.withUnsafeBufferPointer { SignedParts($0) }?.payload.count == size, "StoreBus's own shape, \(size) bytes")
            if first {
                #expect(!known.accepts(der, payload: payload, at: now), "not before the plain check")
                guard case .success(let signer) = await ReceiptSignature.validate(der, payload: payload, roots: [authority.root], at: now) else {
                    Issue.record("the plain check refused a genuine message")
                    return
                }
                known.remember(der, signer: signer)
                first = false
            }
            #expect(known.accepts(der, payload: payload, at: now), "\(size) bytes")
            if size > 0 {
                var other = payload
                other[size / 2] ^= 1
                #expect(!known.accepts(der, payload: other, at: now), "another payload, \(size) bytes")
            }
            // Outside the leaf's validity the plain check decides (and refuses).
            let early = key.certificate.notValidBefore.addingTimeInterval(-1)
            let late = key.certificate.notValidAfter.addingTimeInterval(1)
            #expect(!known.accepts(der, payload: payload, at: early) && !known.accepts(der, payload: payload, at: late))
            #expect(await ReceiptSignature.check(der, payload: payload, roots: [authority.root], at: late) != nil)
        }
        // Another deployment's verifier never learns this signer: the plain check refuses it there.
        let elsewhere = try TemporaryDirectory(prefix: "signers-b")
        defer { elsewhere.remove() }
        let stranger = try SigningAuthority(directory: elsewhere.url)
        let der = try ReceiptSignature.sign(payload: [1, 2, 3], with: key, at: now)
        let verifier = ReceiptVerifier(rootCertificates: [stranger.root])
        #expect(await verifier.checkSignature(der, payload: [1, 2, 3], at: now) != nil)
        #expect(await verifier.checkSignature(der, payload: [1, 2, 3], at: now) != nil, "refused again, not remembered")
        #expect(await authority.verifier.checkSignature(der, payload: [1, 2, 3], at: now) == nil)
        #expect(await authority.verifier.checkSignature(der, payload: [1, 2, 3], at: now) == nil, "by the known signer")
    }

    @Test(
        "3,000 damaged copies of signed receipts (bytes changed, inserted, removed, cut): whatever the known signer accepts, swift-certificates accepts too; attributes out of order, signed as they stand, refused by both"
    )
    func damagedCopies() async throws {
        let directory = try TemporaryDirectory(prefix: "signers")
        defer { directory.remove() }
        let authority = try SigningAuthority(directory: directory.url)
        let key = try authority.current()
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let verifier = ReceiptVerifier(rootCertificates: [authority.root])
        var random = SeededRandom(seed: 1713)
        var acceptedByKnown = 0, refused = 0
        for size in [0, 40, 2_000] {
            let payload = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let der = try ReceiptSignature.sign(payload: payload, with: key, at: now)
            #expect(await verifier.checkSignature(der, payload: payload, at: now) == nil, "the genuine message, \(size) bytes")
            let inside = try #require(der.withUnsafeBufferPointer { SignedParts($0) }).payload
            for _ in 0..<1_000 {
                var damaged = der
                // Most changes land outside the payload: in the envelope, the certificates, the
                // signed attributes and the signature.
                for _ in 0..<Int.random(in: 1...2, using: &random) {
                    var at = Int.random(in: 0..<damaged.count, using: &random)
                    if inside.contains(at), Int.random(in: 0..<4, using: &random) > 0 { at = (at + inside.count) % damaged.count }
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0: damaged.insert(UInt8.random(in: 0...255, using: &random), at: at)
                    case 1: damaged.remove(at: at)
                    case 2: damaged.removeLast(Int.random(in: 1...min(8, damaged.count), using: &random))
                    case 3: damaged[at] ^= 0x01
                    default: damaged[at] = UInt8.random(in: 0...255, using: &random)
                    }
                }
                // What a verifier checks it against: the content it read, or for a message too damaged
                // to read one, the genuine content.
                let attached = (try? ReceiptSignature.attachedPayload(of: damaged)) ?? payload
                if verifier.knownSigners!.accepts(damaged, payload: attached, at: now) {
                    acceptedByKnown += 1
                    #expect(await ReceiptSignature.check(damaged, payload: attached, roots: [authority.root], at: now) == nil, "accepted by the known signer alone")
                } else {
                    refused += 1
                }
            }
        }
        #expect(refused > 2_000, "refused \(refused), accepted \(acceptedByKnown)")

        // Signed attributes out of DER's order, signed as they stand: swift-certificates encodes
        // them in order to check the signature, so it refuses, and so does the known signer.
        let payload: [UInt8] = [9, 8, 7]
        let der = try ReceiptSignature.sign(payload: payload, with: key, at: now)
        let reordered = try Self.attributesSwappedAndSigned(der, key: key.privateKey)
        #expect(!verifier.knownSigners!.accepts(reordered, payload: payload, at: now))
        #expect(await ReceiptSignature.check(reordered, payload: payload, roots: [authority.root], at: now) != nil)
        // The same attributes in order, signed again: both accept.
        let resigned = try Self.attributesSwappedAndSigned(der, key: key.privateKey, swapping: false)
        #expect(verifier.knownSigners!.accepts(resigned, payload: payload, at: now))
        #expect(await ReceiptSignature.check(resigned, payload: payload, roots: [authority.root], at: now) == nil)
    }

    /// `der` with its first two signed attributes swapped (or not) and the signature made again over
    /// the attributes as they then stand, as long as the old signature was.
    static func attributesSwappedAndSigned(_ der: [UInt8], key: P256.Signing.PrivateKey, swapping: Bool = true) throws -> [UInt8] {
        guard let parts = der.withUnsafeBufferPointer({ SignedParts($0) }) else { throw TestingError("not StoreBus's shape") }
        var out = der
        let attributes = parts.signedAttributes
        let set = try DER.parse(Array(der[attributes]))
        guard case .constructed(let children) = set.content else { throw TestingError("no attributes") }
        let elements = Array(children).map { Array($0.encodedBytes) }
        let header = attributes.count - elements.reduce(0) { $0 + $1.count }
        let order = swapping ? [elements[1], elements[0]] + elements.dropFirst(2) : elements
        out.replaceSubrange((attributes.lowerBound + header)..<attributes.upperBound, with: order.joined())
        var signed = Array(out[attributes])
        signed[0] = 0x31
        while true {
            let signature = Array(try key.signature(for: SHA256.hash(data: signed)).derRepresentation)
            if signature.count == parts.signature.count {
                out.replaceSubrange(parts.signature, with: signature)
                return out
            }
        }
    }
}
