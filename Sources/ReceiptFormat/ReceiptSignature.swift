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

    /// `payload` signed with `key`, attached.
    ///
    /// `spliced` (the receipt service's fast path): swift-certificates signs the payload detached
    /// and the payload is put into the signed message here, copied once. Attached by swift-certificates
    /// itself (the plain twin), the payload is copied again at each level that encloses it, as
    /// swift-asn1's serializer writes a length before content it has already written: five copies of
    /// a 1,000-purchase receipt's 270 KB took more than a third of issuing it. The signature is the
    /// same either way (it covers the signed attributes, which carry the payload's digest), and so
    /// is the message's DER (`ReceiptSignatureTests`).
    public static func sign(payload: [UInt8], with key: SigningKey, at signingTime: Date, spliced: Bool = true) throws -> [UInt8] {
        let signed = try CMS.sign(
            payload, signatureAlgorithm: .ecdsaWithSHA256, additionalIntermediateCertificates: [key.issuers[0]],
            certificate: key.certificate, privateKey: .init(key.privateKey), signingTime: signingTime, detached: spliced
        )
        return spliced ? try attach(payload, to: signed) : signed
    }

    /// The signed message `detached` (ContentInfo { signedData, [0] SignedData { version,
    /// digestAlgorithms, EncapsulatedContentInfo { id-data }, certificates, signerInfos } }) with
    /// `payload` as its content: EncapsulatedContentInfo { id-data, [0] OCTET STRING }. Every length
    /// is worked out first and the message written once, front to back.
    static func attach(_ payload: [UInt8], to detached: [UInt8]) throws -> [UInt8] {
        let root = try DER.parse(detached)
        guard root.identifier == .sequence, case .constructed(let outer) = root.content else { throw ReceiptFormatError("the signed message is not a ContentInfo") }
        let info = Array(outer)
        guard info.count == 2, info[1].identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific),
            case .constructed(let wrapped) = info[1].content, let signedData = Array(wrapped).first, signedData.identifier == .sequence,
            case .constructed(let fields) = signedData.content
        else { throw ReceiptFormatError("the signed message holds no SignedData") }
        let parts = Array(fields)
        guard parts.count >= 4, parts[2].identifier == .sequence, case .constructed(let encapsulated) = parts[2].content else {
            throw ReceiptFormatError("the SignedData has no EncapsulatedContentInfo")
        }
        let contentType = Array(encapsulated)
        guard contentType.count == 1 else { throw ReceiptFormatError("the signed content is not detached") }

        let octetLength = payload.count
        let explicitLength = headerSize(octetLength) + octetLength
        let encapsulatedLength = contentType[0].encodedBytes.count + headerSize(explicitLength) + explicitLength
        let before = parts[0].encodedBytes.count + parts[1].encodedBytes.count
        let after = parts[3...].reduce(0) { $0 + $1.encodedBytes.count }
        let signedDataLength = before + headerSize(encapsulatedLength) + encapsulatedLength + after
        let wrapperLength = headerSize(signedDataLength) + signedDataLength
        let infoLength = info[0].encodedBytes.count + headerSize(wrapperLength) + wrapperLength

        var out: [UInt8] = []
        out.reserveCapacity(headerSize(infoLength) + infoLength)
        appendHeader(0x30, infoLength, to: &out)
        out += info[0].encodedBytes
        appendHeader(0xa0, wrapperLength, to: &out)
        appendHeader(0x30, signedDataLength, to: &out)
        out += parts[0].encodedBytes
        out += parts[1].encodedBytes
        appendHeader(0x30, encapsulatedLength, to: &out)
        out += contentType[0].encodedBytes
        appendHeader(0xa0, explicitLength, to: &out)
        appendHeader(0x04, octetLength, to: &out)
        out += payload
        for part in parts[3...] { out += part.encodedBytes }
        return out
    }

    /// The bytes of a DER tag and definite length for `length` bytes of content.
    private static func headerSize(_ length: Int) -> Int {
        length < 0x80 ? 2 : 2 + (Int.bitWidth - length.leadingZeroBitCount + 7) / 8
    }

    private static func appendHeader(_ tag: UInt8, _ length: Int, to out: inout [UInt8]) {
        out.append(tag)
        guard length >= 0x80 else { return out.append(UInt8(length)) }
        let count = (Int.bitWidth - length.leadingZeroBitCount + 7) / 8
        out.append(0x80 | UInt8(count))
        for shift in stride(from: (count - 1) * 8, through: 0, by: -8) { out.append(UInt8((length >> shift) & 0xff)) }
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
        switch await validate(der, payload: payload, roots: roots, at: time) {
        case .success: return nil
        case .failure(let problem): return problem.description
        }
    }

    /// ``check(_:payload:roots:at:)``, giving the signer's certificate when the signature holds.
    static func validate(_ der: [UInt8], payload: [UInt8], roots: [Certificate], at time: Date) async -> Result<Certificate, ReceiptFormatError> {
        let result = await CMS.isValidSignature(dataBytes: payload, signatureBytes: der, trustRoots: CertificateStore(roots), allowAttachedContent: true) {
            RFC5280Policy(validationTime: time)
        }
        switch result {
        case .success(let valid): return .success(valid.signer)
        case .failure(let error): return .failure(ReceiptFormatError("\(error)"))
        }
    }
}
