// swift-crypto 3 does not mark its key types Sendable; they are immutable values.
@preconcurrency import Crypto
import Foundation
import Synchronization
import X509

/// A receipt's signature checked without swift-certificates' CMS parser, for signers a verifier has
/// already seen validated (a fast path; ``ReceiptVerifier`` with `remembersSigners`).
///
/// swift-certificates' `CMS.isValidSignature`, the plain check, parses the whole signed message
/// twice and serializes the content once in between (a 100-purchase receipt's 27 KB each time),
/// parses both certificates and validates the chain: three ECDSA verifications and a fifth of a
/// VerifyReceipt's CPU. Here the message is walked in place; when its certificates and signer are
/// byte for byte those of a message the plain check accepted, the signer's key is taken from that
/// check, the chain is trusted while the receipt's signing time lies inside every certificate's
/// validity, and what is left is what no verifier can skip: the content's SHA-256 against the signed
/// digest and the one signature over the signed attributes.
///
/// It only ever accepts: a message of another shape (not the one StoreBus writes: SignedData version
/// 1, one signer identified by issuer and serial number, SHA-256 and ECDSA P-256, contentType,
/// signingTime and messageDigest signed in DER order, no CRLs and no unsigned attributes), a signer
/// not yet seen, a time outside the validity, a digest or signature that does not hold, all go to
/// the plain check, which decides and says why. So everything it accepts, the plain check accepts
/// too (`KnownSignersTests` holds it to that on thousands of damaged messages).
final class KnownSigners: Sendable {
    /// A signer the plain check accepted, with the validity its chain had then.
    struct Signer {
        var key: P256.Signing.PublicKey
        /// Every certificate of the message, and the roots: later than each one's start, earlier
        /// than each one's end.
        var after: Date
        var before: Date
    }

    /// Signers by the bytes of their message's certificates and signer identifier.
    private let signers = Mutex<[[UInt8]: Signer]>([:])
    /// The roots the plain check trusted (the verifier's), whose validity bounds every chain's.
    private let roots: [Certificate]
    /// At most this many signers are kept; past it, the oldest seen are forgotten all at once.
    static let capacity = 64

    init(roots: [Certificate]) {
        self.roots = roots
    }

    /// Whether `der`, whose attached content is `payload`, is signed by a known signer, validly at
    /// `time`. False means "not decided here", never "invalid".
    func accepts(_ der: [UInt8], payload: [UInt8], at time: Date) -> Bool {
        der.withUnsafeBufferPointer { bytes in
            guard let parts = SignedParts(bytes), parts.payload.count == payload.count,
                let signer = signers.withLock({ $0[parts.signerKey(bytes)] }), signer.after < time, time < signer.before
            else { return false }
            let attached = UnsafeBufferPointer(rebasing: bytes[parts.payload])
            let same = payload.isEmpty || payload.withUnsafeBufferPointer { memcmp($0.baseAddress!, attached.baseAddress!, payload.count) == 0 }
            guard same else { return false }
            guard Array(SHA256.hash(data: attached)).elementsEqual(bytes[parts.messageDigest]) else { return false }
            // The signature is over the signed attributes as a SET (their [0] tag replaced).
            var signed = Array(bytes[parts.signedAttributes])
            signed[0] = 0x31
            guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: bytes[parts.signature]) else { return false }
            return signer.key.isValidSignature(signature, for: SHA256.hash(data: signed))
        }
    }

    /// Keeps the signer of `der`, which the plain check accepted at some time with `certificate`
    /// as its signer.
    func remember(_ der: [UInt8], signer certificate: Certificate) {
        guard let key = P256.Signing.PublicKey(certificate.publicKey) else { return }
        der.withUnsafeBufferPointer { bytes in
            guard let parts = SignedParts(bytes) else { return }
            var certificates: [Certificate] = roots
            for range in parts.certificates {
                guard let parsed = try? Certificate(derEncoded: Array(bytes[range])) else { return }
                certificates.append(parsed)
            }
            guard let after = certificates.map(\.notValidBefore).max(), let before = certificates.map(\.notValidAfter).min() else { return }
            let signer = Signer(key: key, after: after, before: before)
            signers.withLock { known in
                if known.count >= Self.capacity { known.removeAll() }
                known[parts.signerKey(bytes)] = signer
            }
        }
    }
}

/// Where the parts of a signed message of StoreBus's shape lie in its bytes; nil for any other.
struct SignedParts {
    var payload: Range<Int>
    /// The `[0] IMPLICIT` certificates element, whole.
    var certificatesField: Range<Int>
    /// Each certificate, whole.
    var certificates: [Range<Int>]
    /// The signer's IssuerAndSerialNumber, whole.
    var signerIdentifier: Range<Int>
    /// The `[0] IMPLICIT` signed attributes, whole.
    var signedAttributes: Range<Int>
    /// The messageDigest attribute's value's content.
    var messageDigest: Range<Int>
    /// The signature OCTET STRING's content.
    var signature: Range<Int>

    /// The bytes that name a signer: the message's certificates and the signer's identifier.
    func signerKey(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        Array(bytes[certificatesField]) + Array(bytes[signerIdentifier])
    }

    private static let signedDataType: [UInt8] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02]
    private static let dataType: [UInt8] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01]
    /// SHA-256 without parameters: the digest swift-certificates expects beside ecdsa-with-SHA256.
    private static let sha256: [UInt8] = [0x30, 0x0b, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01]
    private static let ecdsaWithSHA256: [UInt8] = [0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02]
    private static let contentTypeAttribute: [UInt8] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x03]
    private static let messageDigestAttribute: [UInt8] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x04]
    private static let signingTimeAttribute: [UInt8] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x05]

}

extension SignedParts {
    /// The parts of the signed message in `bytes`; nil when it is not of StoreBus's shape.
    init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let parts = try? Self.walk(bytes) else { return nil }
        self = parts
    }

    /// An element: where it starts, its tag, its content's bounds and where it ends.
    private struct Node {
        var start: Int
        var tag: UInt8
        var content: Range<Int>
        var end: Int
        var whole: Range<Int> { start..<end }
    }

    private static func walk(_ bytes: UnsafeBufferPointer<UInt8>) throws -> SignedParts? {
        func node(at start: Int, within limit: Int) throws -> Node {
            let read = try ReceiptPayloadWalker.element(bytes, at: start, within: limit)
            return Node(start: start, tag: read.tag, content: read.content, end: read.end)
        }
        func equal(_ node: Node, _ expected: [UInt8]) -> Bool {
            node.whole.count == expected.count && bytes[node.whole].elementsEqual(expected)
        }
        /// The elements that fill `range`.
        func children(_ range: Range<Int>) throws -> [Node] {
            var found: [Node] = []
            var index = range.lowerBound
            while index < range.upperBound {
                let child = try node(at: index, within: range.upperBound)
                found.append(child)
                index = child.end
            }
            return found
        }
        // ContentInfo { signedData, [0] EXPLICIT SignedData }, and nothing after it.
        let info = try node(at: 0, within: bytes.count)
        guard info.tag == 0x30, info.end == bytes.count else { return nil }
        let outer = try children(info.content)
        guard outer.count == 2, equal(outer[0], signedDataType), outer[1].tag == 0xa0 else { return nil }
        let wrapped = try children(outer[1].content)
        guard wrapped.count == 1, wrapped[0].tag == 0x30 else { return nil }
        // SignedData { version 1, digestAlgorithms, encapContentInfo, [0] certificates, signerInfos }
        let fields = try children(wrapped[0].content)
        guard fields.count == 5, fields[0].tag == 0x02, fields[0].content.count == 1, bytes[fields[0].content.lowerBound] == 1,
            fields[1].tag == 0x31, fields[2].tag == 0x30, fields[3].tag == 0xa0, fields[4].tag == 0x31
        else { return nil }
        // EncapsulatedContentInfo { id-data, [0] EXPLICIT OCTET STRING }
        let encapsulated = try children(fields[2].content)
        guard encapsulated.count == 2, equal(encapsulated[0], dataType), encapsulated[1].tag == 0xa0 else { return nil }
        let octets = try children(encapsulated[1].content)
        guard octets.count == 1, octets[0].tag == 0x04 else { return nil }
        let certificates = try children(fields[3].content)
        guard !certificates.isEmpty, certificates.allSatisfy({ $0.tag == 0x30 }) else { return nil }
        // One SignerInfo { version 1, IssuerAndSerialNumber, SHA-256, [0] signedAttrs, ECDSA-SHA256, signature }
        let signerInfos = try children(fields[4].content)
        guard signerInfos.count == 1, signerInfos[0].tag == 0x30 else { return nil }
        let signer = try children(signerInfos[0].content)
        guard signer.count == 6, signer[0].tag == 0x02, signer[0].content.count == 1, bytes[signer[0].content.lowerBound] == 1,
            signer[1].tag == 0x30, equal(signer[2], sha256), signer[3].tag == 0xa0, equal(signer[4], ecdsaWithSHA256), signer[5].tag == 0x04
        else { return nil }
        // The signer's digest algorithm is one the message lists.
        guard try children(fields[1].content).contains(where: { equal($0, sha256) }) else { return nil }
        // Signed attributes: contentType (id-data), signingTime and messageDigest, each once with one
        // value, in DER's order for a SET OF (the order the plain check encodes them in to verify).
        var messageDigest: Range<Int>?
        var seen: Set<[UInt8]> = []
        var previous: Range<Int>?
        for attribute in try children(signer[3].content) {
            if let previous, !bytes[previous].lexicographicallyPrecedes(bytes[attribute.whole]) { return nil }
            previous = attribute.whole
            guard attribute.tag == 0x30 else { return nil }
            let parts = try children(attribute.content)
            guard parts.count == 2, parts[0].tag == 0x06, parts[1].tag == 0x31 else { return nil }
            let type = Array(bytes[parts[0].whole])
            guard seen.insert(type).inserted else { return nil }
            let values = try children(parts[1].content)
            guard values.count == 1 else { return nil }
            switch type {
            case contentTypeAttribute:
                guard equal(values[0], dataType) else { return nil }
            case messageDigestAttribute:
                guard values[0].tag == 0x04, values[0].content.count == 32 else { return nil }
                messageDigest = values[0].content
            case signingTimeAttribute:
                guard values[0].tag == 0x17 || values[0].tag == 0x18 else { return nil }
            default:
                return nil
            }
        }
        guard let messageDigest, seen.count == 3 else { return nil }
        return SignedParts(
            payload: octets[0].content, certificatesField: fields[3].whole, certificates: certificates.map(\.whole),
            signerIdentifier: signer[1].whole, signedAttributes: signer[3].whole, messageDigest: messageDigest, signature: signer[5].content)
    }
}
