import Crypto
import Foundation
import SwiftASN1
@_spi(CMS) import X509

/// App receipts as CMS (PKCS#7) SignedData with the payload attached, as Apple encodes them: the
/// signer's leaf and the intermediate are in the message, the root is the verifier's to supply.
public enum ReceiptSignature {
    /// id-signedData (PKCS #7).
    static let signedDataType: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 2]
    /// id-data (PKCS #7).
    static let dataType: ASN1ObjectIdentifier = [1, 2, 840, 113549, 1, 7, 1]

    /// The DER of `receipt` signed with `key`, its signing time `signingTime`.
    public static func sign(_ receipt: AppReceipt, with key: SigningKey, at signingTime: Date) throws -> [UInt8] {
        try sign(payload: receipt.der(), with: key, at: signingTime)
    }

    /// `payload` signed with `key` (for tests that sign payloads of their own making).
    public static func sign(payload: [UInt8], with key: SigningKey, at signingTime: Date) throws -> [UInt8] {
        try CMS.sign(
            payload, signatureAlgorithm: .ecdsaWithSHA256, additionalIntermediateCertificates: [key.issuers[0]],
            certificate: key.certificate, privateKey: .init(key.privateKey), signingTime: signingTime, detached: false
        )
    }

    /// Whether `der` begins as a PKCS#7 signed message does: a SEQUENCE whose first element is the
    /// signedData content type. What does not is no receipt at all (verifyReceipt's 21002); what does
    /// but fails further is a receipt that cannot be authenticated (21003), whichever byte was changed.
    public static func looksSigned(_ der: [UInt8]) -> Bool {
        guard der.count > 2, der[0] == 0x30 else { return false }
        var index = 1
        if der[1] & 0x80 != 0 { index += 1 + Int(der[1] & 0x7f) } else { index += 1 }
        let oid: [UInt8] = [0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02]
        guard der.count >= index + oid.count else { return false }
        return Array(der[index..<(index + oid.count)]) == oid
    }

    /// The payload attached to a CMS SignedData, read without checking the signature: ContentInfo
    /// { signedData, [0] SignedData { version, digestAlgorithms, EncapsulatedContentInfo { id-data,
    /// [0] OCTET STRING } ... } }. Throws ``ReceiptFormatError`` for anything else.
    public static func attachedPayload(of der: [UInt8]) throws -> [UInt8] {
        do {
            let root = try BER.parse(der)
            return try BER.sequence(root, identifier: .sequence) { nodes in
                let type = try ASN1ObjectIdentifier(berEncoded: &nodes)
                guard type == signedDataType else { throw ReceiptFormatError("not a CMS SignedData (content type \(type))") }
                return try BER.explicitlyTagged(&nodes, tagNumber: 0, tagClass: .contextSpecific) { node in
                    try BER.sequence(node, identifier: .sequence) { nodes in
                        _ = try Int(berEncoded: &nodes)
                        _ = nodes.next() // digestAlgorithms
                        guard let encapsulated = nodes.next() else { throw ReceiptFormatError("no encapsulated content") }
                        let payload = try BER.sequence(encapsulated, identifier: .sequence) { nodes in
                            let contentType = try ASN1ObjectIdentifier(berEncoded: &nodes)
                            guard contentType == dataType else { throw ReceiptFormatError("the signed content is not data (\(contentType))") }
                            return try BER.optionalExplicitlyTagged(&nodes, tagNumber: 0, tagClass: .contextSpecific) { node in
                                try ASN1OctetString(berEncoded: node)
                            }
                        }
                        while nodes.next() != nil {}
                        guard let payload else { throw ReceiptFormatError("the receipt's content is detached") }
                        return Array(payload.bytes)
                    }
                }
            }
        } catch let error as ReceiptFormatError {
            throw error
        } catch {
            throw ReceiptFormatError("not a CMS SignedData: \(error)")
        }
    }

    /// Whether `der`, whose content ``attachedPayload(of:)`` read as `payload`, is signed by a leaf
    /// that chains to one of `roots`, judged at `time` (the receipt's creation: a leaf replaced since
    /// still vouches for what it signed). Returns why not.
    public static func check(_ der: [UInt8], payload: [UInt8], roots: [Certificate], at time: Date) async -> String? {
        let result = await CMS.isValidSignature(dataBytes: payload, signatureBytes: der, trustRoots: CertificateStore(roots), allowAttachedContent: true) {
            RFC5280Policy(validationTime: time)
        }
        switch result {
        case .success: return nil
        case .failure(let error): return "\(error)"
        }
    }
}
