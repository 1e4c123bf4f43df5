// swift-crypto 3 does not mark its key types Sendable; they are immutable values.
@preconcurrency import Crypto
import Foundation
import X509

/// JSON Web Signatures as the App Store signs its data (signed transactions, renewal information):
/// compact serialization, ES256, the `x5c` chain (leaf, intermediate, root) in the header.
public enum JWS {
    /// A JWS header: ES256, and the chain (leaf, intermediate, root) as base64 DER.
    struct Header: Codable {
        var alg: String
        var x5c: [String]
    }

    /// When a payload says it was signed (the chain is judged then).
    private struct SigningTime: Decodable {
        var signedDate: Int64?
        var receiptCreationDate: Int64?
    }

    /// `payload`'s JSON, keys sorted, as a JWS signed with `key`, the chain in its header. Throws
    /// when the payload cannot be encoded or the key cannot sign: never an unsigned answer.
    ///
    /// `written` (the receipt service's fast path, `FastPaths.enabled` there): the payload's JSON
    /// written by ``SortedJSONEncoder``, the same bytes as JSONEncoder's (which a payload it leaves
    /// to JSONEncoder, and `written` false, get), and the JWS put together by
    /// ``assemble(_:prefix:key:)``.
    public static func sign(_ payload: some Encodable, with key: SigningKey, written: Bool = true) throws -> String {
        let json = try json(payload, written: written)
        if written, let prefix = key.jwsPrefix { return try assemble(json, prefix: prefix, key: key.privateKey) }
        let header = try key.jwsPrefix?.segment ?? headerSegment(chain: key.chain)
        let input = header + "." + Base64URL.encode(json)
        let signature = try key.privateKey.signature(for: Data(input.utf8))
        return input + "." + Base64URL.encode(signature.rawRepresentation)
    }

    /// The JWS of the payload `json` put together in one buffer: the key's header segment and its
    /// dot, the payload's base64url, its signature's. The signing input is hashed from `prefix`'s
    /// SHA-256 state, the header's blocks already taken in (the x5c chain is about 3.7 KB of the
    /// 5 KB input): only the payload is hashed per signature. (`sign`'s plain twin concatenated
    /// strings, copied the input into Data and hashed all of it: about half as much again as the
    /// ECDSA signature's own arithmetic, `JWSAssemblyTests` holds the two to the same segments.)
    static func assemble(_ json: [UInt8], prefix: SigningKey.JWSPrefix, key: P256.Signing.PrivateKey) throws -> String {
        var header = prefix.segment
        // An ES256 signature is 64 bytes.
        let capacity = header.utf8.count + 1 + Base64URL.encodedLength(json.count) + 1 + Base64URL.encodedLength(64)
        return try String(unsafeUninitializedCapacity: capacity) { buffer in
            var at = header.withUTF8 { UnsafeMutableBufferPointer(rebasing: buffer[...]).initialize(fromContentsOf: $0) }
            buffer[at] = UInt8(ascii: ".")
            at += 1
            let payloadStart = at
            at += Base64URL.encode(json, into: UnsafeMutableBufferPointer(rebasing: buffer[at...]))
            var hasher = prefix.hasher
            hasher.update(bufferPointer: UnsafeRawBufferPointer(UnsafeMutableBufferPointer(rebasing: buffer[payloadStart..<at])))
            let signature = try key.signature(for: hasher.finalize()).rawRepresentation
            guard signature.count == 64 else { throw SigningFailure(description: "an ES256 signature of \(signature.count) bytes") }
            buffer[at] = UInt8(ascii: ".")
            at += 1
            at += Base64URL.encode(signature, into: UnsafeMutableBufferPointer(rebasing: buffer[at...]))
            return at
        }
    }

    /// A signature that is not what ES256 makes.
    struct SigningFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// A payload's JSON, keys in byte order, when `written`: its own (``SortedJSONWritable``) when it
    /// writes one, else ``SortedJSONEncoder``'s when it can; JSONEncoder's otherwise.
    public static func json(_ payload: some Encodable, written: Bool) throws -> [UInt8] {
        if written, let writable = payload as? any SortedJSONWritable {
            var out: [UInt8] = []
            out.reserveCapacity(1024)
            writable.writeSortedJSON(to: &out)
            return out
        }
        if written, let bytes = try? SortedJSONEncoder.encode(payload) { return bytes }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(payload))
    }

    /// The base64url header segment of a JWS signed under `chain` (leaf, intermediate, root).
    static func headerSegment(chain: [Certificate]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Base64URL.encode(try encoder.encode(Header(alg: "ES256", x5c: try chain.map { Data(try SigningKey.der($0)).base64EncodedString() })))
    }

    /// The JSON payload of a compact JWS, read without checking its signature: for what this
    /// deployment just signed itself, or for figures, never for trust.
    public static func unverifiedPayload(_ jws: String) -> [String: Any]? {
        guard let parts = segments(jws), !parts[1].isEmpty, let bytes = Base64URL.decode(parts[1]) else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
    }

    /// The three segments of a compact JWS (header, payload, signature; any may be empty), nil
    /// when it does not have exactly two dots. Split on its UTF-8 bytes: `String.split` compares
    /// Characters, grapheme by grapheme, and spent 15 % of a notification stream reader's CPU on
    /// the kilobytes of a signed notification.
    static func segments(_ jws: String) -> [Substring]? {
        let utf8 = jws.utf8
        guard let (first, second) = dots(jws) else { return nil }
        let firstDot = utf8.index(utf8.startIndex, offsetBy: first)
        let secondDot = utf8.index(utf8.startIndex, offsetBy: second)
        return [Substring(utf8[..<firstDot]), Substring(utf8[utf8.index(after: firstDot)..<secondDot]), Substring(utf8[utf8.index(after: secondDot)...])]
    }

    /// The byte offsets of the two dots of a compact JWS, nil when it does not have exactly two:
    /// searched in the string's contiguous bytes (a native string's; a bridged one is copied).
    static func dots(_ jws: String) -> (Int, Int)? {
        if let found = jws.utf8.withContiguousStorageIfAvailable({ dots(bytes: $0) }) { return found }
        return Array(jws.utf8).withUnsafeBufferPointer { dots(bytes: $0) }
    }

    /// ``dots(_:)`` in `bytes`, found by memchr (a byte-by-byte search of a signed notification's
    /// kilobytes was 4 % of the notification service's CPU keeping them).
    public static func dots(bytes: UnsafeBufferPointer<UInt8>) -> (Int, Int)? {
        guard let base = bytes.baseAddress else { return nil }
        func dot(from start: Int) -> Int? {
            guard start < bytes.count, let found = memchr(base + start, Int32(UInt8(ascii: ".")), bytes.count - start) else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
        guard let first = dot(from: 0), let second = dot(from: first + 1), dot(from: second + 1) == nil else { return nil }
        return (first, second)
    }

    /// The payload bytes of a compact JWS in `bytes` (not a JSON check: what it decodes to), read
    /// without checking its signature; nil when it is not three segments or its payload is not
    /// base64url. For figures and load generators reading what a deployment just signed.
    public static func unverifiedPayloadBytes(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard let (first, second) = dots(bytes: bytes), second > first + 1 else { return nil }
        return Base64URL.decode(bytes: UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second]))
    }

    /// Why a JWS does not verify.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// The payload of `jws`, decoded as `type`, once its signature and chain are checked against
    /// `roots`, the chain judged at the payload's signedDate as Apple's libraries do with online
    /// checks off.
    public static func verify<Payload: Decodable>(_ jws: String, as type: Payload.Type, roots: [Certificate]) async throws(Failure) -> Payload {
        guard let parts = segments(jws), let headerBytes = Base64URL.decode(parts[0]), let payloadBytes = Base64URL.decode(parts[1]),
            let signatureBytes = Base64URL.decode(parts[2])
        else { throw Failure(description: "not a JWS in compact serialization") }
        let decoder = JSONDecoder()
        guard let header = try? decoder.decode(Header.self, from: Data(headerBytes)),
            let payload = try? decoder.decode(Payload.self, from: Data(payloadBytes)),
            let signing = try? decoder.decode(SigningTime.self, from: Data(payloadBytes))
        else { throw Failure(description: "the header or payload is not the JSON object expected") }
        guard header.alg == "ES256" else { throw Failure(description: "the algorithm is not ES256") }
        let x5c = header.x5c
        guard x5c.count == 3 else { throw Failure(description: "the header has no x5c chain of three certificates") }
        let chain: [Certificate]
        do {
            chain = try x5c.map { text in
                guard let der = Data(base64Encoded: text) else { throw Failure(description: "an x5c entry is not base64") }
                return try Certificate(derEncoded: Array(der))
            }
        } catch {
            throw Failure(description: "an x5c certificate does not parse: \(error)")
        }
        guard chain[0].extensions[oid: SigningKey.signingMarker] != nil, chain[1].extensions[oid: SigningKey.intermediateMarker] != nil else {
            throw Failure(description: "the chain's certificates lack the signing extensions")
        }
        let signedMS = signing.signedDate ?? signing.receiptCreationDate
        let time = signedMS.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? Date()
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) { RFC5280Policy(validationTime: time) }
        let result = await verifier.validate(leaf: chain[0], intermediates: CertificateStore([chain[1]]))
        guard case .validCertificate = result else { throw Failure(description: "the chain does not lead to a trusted root: \(result)") }
        guard let key = P256.Signing.PublicKey(chain[0].publicKey),
            let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
            key.isValidSignature(signature, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { throw Failure(description: "the signature does not match") }
        return payload
    }

}
