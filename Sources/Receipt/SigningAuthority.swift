// swift-crypto 3 does not mark its key types Sendable; they are immutable values.
@preconcurrency import Crypto
import Foundation
import ReceiptFormat
import StoreBus
import SwiftASN1
import Synchronization
import X509

/// StoreBus's certificate authority in place of Apple's: a root, an intermediate, and signing
/// leaves, all P-256, made at first start and kept in a ``SigningKeyStore``: files in `<data>/keys`
/// (private keys mode 0600), or, for several instances of the receipt service, their database.
///
/// The certificates carry what Apple's verifiers look for: the intermediate the extension
/// 1.2.840.113635.100.6.2.1 and every leaf 1.2.840.113635.100.6.11.1, with the key identifiers,
/// basic constraints and key usages that OpenSSL's strict checks require. A leaf is replaced by a
/// new one when less than ``renewalWindow`` of it is left (checked whenever one is used) or when
/// asked (``rotate(now:)``); the old leaves stay in the store and in ``leaves``, so what they signed still
/// verifies: verifiers judge a signature at the time it was made. Instances sharing a store sign
/// with the newest leaf any of them issued, once they ``reload()``.
public final class SigningAuthority: Sendable {
    /// The root verifiers trust.
    public let root: Certificate
    /// The intermediate that issues the leaves.
    public let intermediate: Certificate
    /// The verifier of this deployment's receipts: trusting ``root``, remembering the signers it
    /// has validated (with fast paths on).
    public let verifier: ReceiptVerifier
    private let intermediateKey: P256.Signing.PrivateKey
    private let store: any SigningKeyStore
    private let leafValidity: TimeInterval
    /// The leaves, newest first.
    private let state: Mutex<[SigningKey]>

    /// How long before its end a leaf is replaced.
    public static let renewalWindow: TimeInterval = 30 * 86_400

    /// Loads the authority kept in `directory` (``KeyFiles``), making whatever is missing.
    public convenience init(directory: URL, leafValidityDays: Int = 365, now: Date = Date()) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try self.init(store: KeyFiles(directory: directory), leafValidityDays: leafValidityDays, now: now)
    }

    /// Loads the authority kept in `store`, making whatever is missing, in one update of the store:
    /// a new root makes a new intermediate as well, and a new intermediate a new leaf. Leaves are
    /// issued for `leafValidityDays` days.
    public init(store: any SigningKeyStore, leafValidityDays: Int = 365, now: Date = Date()) throws {
        self.store = store
        leafValidity = TimeInterval(leafValidityDays) * 86_400
        let (root, intermediate) = try store.update { kept -> (KeyPair, KeyPair) in
            var fresh = false
            let root: KeyPair
            if let loaded = try kept.pair("root") {
                root = loaded
            } else {
                root = try Self.makeRoot(now: now)
                kept["root"] = try StoredKeyPair(root)
                fresh = true
            }
            if !fresh, let loaded = try kept.pair("intermediate") { return (root, loaded) }
            let intermediate = try Self.makeIntermediate(root: root, now: now)
            kept["intermediate"] = try StoredKeyPair(intermediate)
            // Leaves of another intermediate no longer chain to the root.
            for name in kept.keys where name.hasPrefix("leaf-") { kept[name] = nil }
            return (root, intermediate)
        }
        self.root = root.certificate
        self.intermediate = intermediate.certificate
        verifier = ReceiptVerifier(rootCertificates: [root.certificate], walksPayload: FastPaths.enabled, remembersSigners: FastPaths.enabled)
        intermediateKey = intermediate.key
        state = Mutex([])
        try reload()
        _ = try current(now: now)
    }

    private typealias KeyPair = (certificate: Certificate, key: P256.Signing.PrivateKey)

    private static func makeRoot(now: Date) throws -> KeyPair {
        let key = P256.Signing.PrivateKey()
        let name = try Self.name("StoreBus Root CA", key: key)
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(25 * 365 * 86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                try Certificate.Extension(SubjectKeyIdentifier(hash: .init(key.publicKey)), critical: false)
            ]),
            issuerPrivateKey: .init(key)
        )
        return (certificate, key)
    }

    private static func makeIntermediate(root: KeyPair, now: Date) throws -> KeyPair {
        let key = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(15 * 365 * 86_400),
            issuer: root.certificate.subject, subject: try Self.name("StoreBus Receipt Signing Intermediate", key: key),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true),
                try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true),
                try Certificate.Extension(SubjectKeyIdentifier(hash: .init(key.publicKey)), critical: false),
                try Self.authorityKeyIdentifier(of: root.certificate),
                Certificate.Extension(oid: SigningKey.intermediateMarker, critical: false, value: [0x05, 0x00])
            ]),
            issuerPrivateKey: .init(root.key)
        )
        return (certificate, key)
    }

    /// Reads the leaves from the store again: those another instance sharing it issued since
    /// (a rotation, a renewal) are signed with from now on, the newest first.
    public func reload() throws {
        let kept = try store.load()
        let issuers = [intermediate, root]
        // Issued in name order (leaf-000001-…, leaf-000002-…): newest first. Their validity
        // times are whole seconds, so two leaves issued in one second could not be told apart by them.
        let leaves = try kept.keys.filter { $0.hasPrefix("leaf-") }.sorted().reversed().compactMap { name -> SigningKey? in
            guard let pair = try kept.pair(name) else { return nil }
            return SigningKey(certificate: pair.certificate, privateKey: pair.key, issuers: issuers)
        }
        state.withLock { $0 = leaves }
    }

    /// Every leaf, newest first.
    public var leaves: [SigningKey] { state.withLock { $0 } }

    /// The leaf to sign with at `now`: the newest, replaced first when it ends within
    /// ``renewalWindow`` (or has not begun).
    public func current(now: Date = Date()) throws -> SigningKey {
        try state.withLock { leaves in
            if let newest = leaves.first, newest.certificate.notValidBefore <= now,
                newest.certificate.notValidAfter.timeIntervalSince(now) > min(Self.renewalWindow, leafValidity / 2)
            {
                return newest
            }
            let made = try makeLeaf(now: now)
            leaves.insert(made, at: 0)
            return made
        }
    }

    /// Issues a new leaf, which signs from now on; the old ones keep verifying what they signed.
    @discardableResult
    public func rotate(now: Date = Date()) throws -> SigningKey {
        try state.withLock { leaves in
            let made = try makeLeaf(now: now)
            leaves.insert(made, at: 0)
            return made
        }
    }

    private func makeLeaf(now: Date) throws -> SigningKey {
        let key = P256.Signing.PrivateKey()
        let certificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(leafValidity),
            issuer: intermediate.subject, subject: try Self.name("StoreBus Receipt Signing", key: key),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions([
                try Certificate.Extension(BasicConstraints.notCertificateAuthority, critical: true),
                try Certificate.Extension(KeyUsage(digitalSignature: true), critical: true),
                try Certificate.Extension(SubjectKeyIdentifier(hash: .init(key.publicKey)), critical: false),
                try Self.authorityKeyIdentifier(of: intermediate),
                Certificate.Extension(oid: SigningKey.signingMarker, critical: false, value: [0x05, 0x00])
            ]),
            issuerPrivateKey: .init(intermediateKey)
        )
        let stored = try StoredKeyPair((certificate, key))
        try store.update { kept in
            let sequence = kept.keys.filter { $0.hasPrefix("leaf-") }.count + 1
            kept["leaf-\(String(repeating: "0", count: max(0, 6 - String(sequence).count)))\(sequence)-\(Self.keyID(of: certificate).prefix(8))"] = stored
        }
        return SigningKey(certificate: certificate, privateKey: key, issuers: [intermediate, root])
    }

    /// The root in PEM.
    public var rootPEM: String {
        get throws { try root.serializeAsPEM().pemString }
    }

    /// The leaves' public keys as a JWKS document (RFC 7517), newest first, each with its chain.
    public func jwks() throws -> String {
        var keys: [[String: Any]] = []
        for leaf in leaves {
            guard let publicKey = P256.Signing.PublicKey(leaf.certificate.publicKey) else { continue }
            let point = publicKey.x963Representation
            keys.append([
                "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256",
                "kid": Self.keyID(of: leaf.certificate),
                "x": Base64URL.encode(point[1...32]), "y": Base64URL.encode(point[33...64]),
                "x5c": try leaf.chain.map { Data(try SigningKey.der($0)).base64EncodedString() }
            ])
        }
        let data = try JSONSerialization.data(withJSONObject: ["keys": keys], options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// A certificate's subject key identifier in hex (its key's id in the JWKS).
    public static func keyID(of certificate: Certificate) -> String {
        let identifier = (try? certificate.extensions.subjectKeyIdentifier)??.keyIdentifier ?? []
        return identifier.map { String(format: "%02x", $0) }.joined()
    }

    private static func name(_ commonName: String, key: P256.Signing.PrivateKey) throws -> DistinguishedName {
        // A short id of the key in the name tells one deployment's authority from another's.
        let id = SHA256.hash(data: key.publicKey.x963Representation).prefix(4).map { String(format: "%02x", $0) }.joined()
        return try DistinguishedName {
            CommonName("\(commonName) \(id)")
            OrganizationName("StoreBus")
            CountryName("US")
        }
    }

    private static func authorityKeyIdentifier(of issuer: Certificate) throws -> Certificate.Extension {
        guard let identifier = try issuer.extensions.subjectKeyIdentifier?.keyIdentifier else {
            throw StartupError("the certificate \(issuer.subject) has no subject key identifier")
        }
        return try Certificate.Extension(AuthorityKeyIdentifier(keyIdentifier: identifier), critical: false)
    }
}

/// A key pair as a ``SigningKeyStore`` keeps it: the certificate and its private key in PEM.
public struct StoredKeyPair: Sendable, Equatable {
    public var certificatePEM: String
    public var keyPEM: String

    public init(certificatePEM: String, keyPEM: String) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }

    init(_ pair: (certificate: Certificate, key: P256.Signing.PrivateKey)) throws {
        self.init(certificatePEM: try pair.certificate.serializeAsPEM().pemString, keyPEM: pair.key.pemRepresentation)
    }

    /// The pair decoded; refused when the key is not the certificate's.
    func decoded(_ name: String) throws -> (certificate: Certificate, key: P256.Signing.PrivateKey) {
        do {
            let certificate = try Certificate(pemEncoded: certificatePEM)
            let key = try P256.Signing.PrivateKey(pemRepresentation: keyPEM)
            guard P256.Signing.PublicKey(certificate.publicKey)?.rawRepresentation == key.publicKey.rawRepresentation else {
                throw StartupError("the signing key \(name) is not the key of \(certificate.subject)")
            }
            return (certificate, key)
        } catch let error as StartupError {
            throw error
        } catch {
            throw StartupError("cannot read the signing key \(name): \(error)")
        }
    }
}

extension [String: StoredKeyPair] {
    fileprivate func pair(_ name: String) throws -> (certificate: Certificate, key: P256.Signing.PrivateKey)? {
        try self[name]?.decoded(name)
    }
}

/// Where a ``SigningAuthority`` keeps its key pairs, by name (`root`, `intermediate`,
/// `leaf-000001-…`): a directory of PEM files (``KeyFiles``), or a table of the receipt service's
/// PostgreSQL database that all its instances share.
public protocol SigningKeyStore: Sendable {
    /// Every pair kept, by name.
    func load() throws -> [String: StoredKeyPair]
    /// Runs `body` on the pairs kept, alone (no other process changes them meanwhile), and keeps
    /// what it leaves: pairs added and removed.
    func update<T>(_ body: (inout [String: StoredKeyPair]) throws -> T) throws -> T
}

/// The PEM files of the authority in a directory: `<name>-certificate.pem` and `<name>-key.pem`
/// (mode 0600), for one receipt service (its data directory's `keys`).
public struct KeyFiles: SigningKeyStore {
    let directory: URL

    public init(directory: URL) {
        self.directory = directory
    }

    public func load() throws -> [String: StoredKeyPair] {
        var kept: [String: StoredKeyPair] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path) where file.hasSuffix("-certificate.pem") && !file.hasPrefix(".") {
            let name = String(file.dropLast("-certificate.pem".count))
            let keyURL = directory.appendingPathComponent("\(name)-key.pem")
            guard FileManager.default.fileExists(atPath: keyURL.path) else { continue }
            do {
                kept[name] = StoredKeyPair(
                    certificatePEM: try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8),
                    keyPEM: try String(contentsOf: keyURL, encoding: .utf8))
            } catch {
                throw StartupError("cannot read \(file) or \(keyURL.lastPathComponent) in \(directory.path): \(error)")
            }
        }
        return kept
    }

    /// One process owns a data directory, so an update is a load, `body`, and the files of the pairs
    /// it added written (each key before its certificate) and of those it removed deleted.
    public func update<T>(_ body: (inout [String: StoredKeyPair]) throws -> T) throws -> T {
        let before = try load()
        var kept = before
        let result = try body(&kept)
        for (name, pair) in kept where before[name] != pair {
            try write(Array(pair.keyPEM.utf8), to: "\(name)-key.pem", mode: 0o600)
            try write(Array(pair.certificatePEM.utf8), to: "\(name)-certificate.pem", mode: 0o644)
        }
        for name in before.keys where kept[name] == nil {
            for suffix in ["-certificate.pem", "-key.pem"] { try? FileManager.default.removeItem(at: directory.appendingPathComponent(name + suffix)) }
        }
        return result
    }

    private func write(_ bytes: [UInt8], to name: String, mode: Int) throws {
        let target = directory.appendingPathComponent(name)
        let temporary = directory.appendingPathComponent(".\(name).tmp")
        try? FileManager.default.removeItem(at: temporary)
        guard FileManager.default.createFile(atPath: temporary.path, contents: Data(bytes), attributes: [.posixPermissions: mode]) else {
            throw StartupError("cannot write \(temporary.path)")
        }
        let descriptor = open(temporary.path, O_RDONLY)
        if descriptor >= 0 { fsync(descriptor); close(descriptor) }
        guard rename(temporary.path, target.path) == 0 else {
            throw StartupError("cannot rename \(temporary.path) to \(target.path): \(String(cString: strerror(errno)))")
        }
    }
}
