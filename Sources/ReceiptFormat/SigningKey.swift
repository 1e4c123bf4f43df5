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
    /// base64url segment, with the SHA-256 state once it and the dot after it are hashed (see
    /// ``JWS/assemble(_:prefix:key:)``): made once, as serializing the three certificates again for
    /// each signature cost more than the signature itself. Nil when a certificate cannot be
    /// serialized.
    let jwsPrefix: JWSPrefix?

    /// A JWS's header segment, and the hash state of it and its dot.
    struct JWSPrefix: Sendable {
        let segment: String
        let hasher: SHA256

        init(segment: String) {
            self.segment = segment
            var hasher = SHA256()
            hasher.update(data: Array(segment.utf8) + [UInt8(ascii: ".")])
            self.hasher = hasher
        }
    }

    /// A leaf, its key, and the certificates above it (intermediate, root).
    public init(certificate: Certificate, privateKey: P256.Signing.PrivateKey, issuers: [Certificate]) {
        self.certificate = certificate
        self.privateKey = privateKey
        self.issuers = issuers
        jwsPrefix = (try? JWS.headerSegment(chain: [certificate] + issuers)).map(JWSPrefix.init(segment:))
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
    /// The alphabet and padding of every encoding here.
    static let options: ExtrasBase64.Base64.EncodingOptions = [.base64UrlAlphabet, .omitPaddingCharacter]

    /// The length of `count` bytes encoded.
    static func encodedLength(_ count: Int) -> Int {
        ExtrasBase64.Base64.encodedLength(bytesCount: count, options: options)
    }

    /// `bytes` encoded into the start of `output` (its room checked by the encoder); the number of
    /// bytes written.
    static func encode(_ bytes: some Collection<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Int {
        var output = output.mutableSpan
        if let written = bytes.withContiguousStorageIfAvailable({ ExtrasBase64.Base64.encode(bytes: $0.span, into: &output, options: options) }) {
            return written
        }
        return ExtrasBase64.Base64.encode(bytes: Array(bytes).span, into: &output, options: options)
    }

    /// `bytes` encoded, by swift-extras-base64 straight into the URL alphabet without padding.
    /// (Foundation's base64 then a byte-by-byte rewrite of it was 7 % of the receipt service's CPU
    /// signing notifications, most of it in `Data`'s iterator; `replacingOccurrences` before that,
    /// with its locale-aware search, 15 %.)
    public static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        if let encoded = bytes.withContiguousStorageIfAvailable({ ExtrasBase64.Base64.encodeToString(bytes: $0, options: options) }) {
            return encoded
        }
        return ExtrasBase64.Base64.encodeToString(bytes: Array(bytes), options: options)
    }

    /// The bytes of `text`, or nil when it is not unpadded base64url.
    ///
    /// Decoded by swift-extras-base64 from the text's own bytes. (A byte-by-byte rewrite into the
    /// standard alphabet for Foundation's decoder was an eighth of a notification reader's CPU.)
    public static func decode<Text: StringProtocol>(_ text: Text) -> [UInt8]? {
        if let decoded = text.utf8.withContiguousStorageIfAvailable({ decode(bytes: $0) }) { return decoded }
        return Array(text.utf8).withUnsafeBufferPointer { decode(bytes: $0) }
    }

    /// The bytes `text` (unpadded base64url) encodes, or nil when it is not such text.
    public static func decode(bytes text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        // The decoder takes a padding character at the end even when told there is none. Looked for
        // with memchr: a byte-by-byte search took longer than the decoding itself (a signed
        // notification's 4 KB payload, kept compact by the notification service).
        guard let base = text.baseAddress else { return [] }
        guard memchr(base, Int32(UInt8(ascii: "=")), text.count) == nil else { return nil }
        return try? ExtrasBase64.Base64.decode(bytes: text, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }
}
