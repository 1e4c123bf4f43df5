// swift-crypto 3 does not mark its key types Sendable; they are immutable values.
@preconcurrency import Crypto
import ExtrasBase64
import Foundation
import SwiftASN1
import X509

/// A key that signs receipts and transactions, with the chain a verifier needs.
public struct SigningKey: Sendable {
    /// Extension that marks Apple's WWDR intermediate certificates, required by Apple's verifiers.
    public static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]
    /// Extension that marks Apple's receipt and transaction signing certificates.
    public static let signingMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]

    /// The leaf certificate.
    public let certificate: Certificate
    /// Its private key.
    let privateKey: P256.Signing.PrivateKey
    /// The intermediate that issued it, then the root.
    public let issuers: [Certificate]

    /// The JWS header every signature of this key carries (ES256 and the chain as `x5c`), as its
    /// base64url segment: made once, as serializing the three certificates again for each signature
    /// cost more than the signature itself. Nil when a certificate cannot be serialized.
    let jwsHeaderSegment: String?

    /// A leaf, its key, and the certificates above it (intermediate, root).
    public init(certificate: Certificate, privateKey: P256.Signing.PrivateKey, issuers: [Certificate]) {
        self.certificate = certificate
        self.privateKey = privateKey
        self.issuers = issuers
        jwsHeaderSegment = try? JWS.headerSegment(chain: [certificate] + issuers)
    }

    /// Leaf, intermediate, root: the `x5c` order.
    public var chain: [Certificate] { [certificate] + issuers }

    /// A certificate's DER bytes.
    public static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}

/// Base64 with the URL alphabet and no padding (JWS, JWK).
public enum Base64URL {
    /// `bytes` encoded, by swift-extras-base64 straight into the URL alphabet without padding.
    /// (Foundation's base64 then a byte-by-byte rewrite of it was 7 % of the receipt service's CPU
    /// signing notifications, most of it in `Data`'s iterator; `replacingOccurrences` before that,
    /// with its locale-aware search, 15 %.)
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let options: ExtrasBase64.Base64.EncodingOptions = [.base64UrlAlphabet, .omitPaddingCharacter]
        if let encoded = bytes.withContiguousStorageIfAvailable({ ExtrasBase64.Base64.encodeToString(bytes: $0, options: options) }) {
            return encoded
        }
        return ExtrasBase64.Base64.encodeToString(bytes: Array(bytes), options: options)
    }

    /// The bytes of `text`, or nil when it is not unpadded base64url.
    public static func decode<Text: StringProtocol>(_ text: Text) -> [UInt8]? {
        var base64 = [UInt8]()
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): base64.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): base64.append(UInt8(ascii: "/"))
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil // not unpadded base64url
            default: base64.append(byte)
            }
        }
        base64 += Array(repeating: UInt8(ascii: "="), count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: Data(base64)).map(Array.init)
    }
}
