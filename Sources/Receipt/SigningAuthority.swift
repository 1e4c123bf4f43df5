// swift-crypto 3 does not mark its key types Sendable; they are immutable values.
@preconcurrency import Crypto
import Foundation
import ReceiptFormat
import StoreBus
import SwiftASN1
import Synchronization
import X509

/// StoreBus's certificate authority in place of Apple's: a root, an intermediate, and signing
/// leaves, all P-256, made at first start in `<data>/keys` and kept there (private keys mode 0600).
///
/// The certificates carry what Apple's verifiers look for: the intermediate the extension
/// 1.2.840.113635.100.6.2.1 and every leaf 1.2.840.113635.100.6.11.1, with the key identifiers,
/// basic constraints and key usages that OpenSSL's strict checks require. A leaf is replaced by a
/// new one when less than ``renewalWindow`` of it is left (checked whenever one is used) or when
/// asked (``rotate(now:)``); the old leaves stay on disk and in ``leaves``, so what they signed still
/// verifies: verifiers judge a signature at the time it was made.
public final class SigningAuthority: Sendable {
    /// The root verifiers trust.
    public let root: Certificate
    /// The intermediate that issues the leaves.
    public let intermediate: Certificate
    private let intermediateKey: P256.Signing.PrivateKey
    private let directory: URL
    private let leafValidity: TimeInterval
    /// The leaves, newest first.
    private let state: Mutex<[SigningKey]>

    /// How long before its end a leaf is replaced.
    public static let renewalWindow: TimeInterval = 30 * 86_400

    /// Loads the authority kept in `directory`, making whatever is missing: a new root makes a new
    /// intermediate and leaf as well. Leaves are issued for `leafValidityDays` days.
    public init(directory: URL, leafValidityDays: Int = 365, now: Date = Date()) throws {
        self.directory = directory
        leafValidity = TimeInterval(leafValidityDays) * 86_400
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let store = KeyFiles(directory: directory)
        var fresh = false
        let root: (certificate: Certificate, key: P256.Signing.PrivateKey)
        if let loaded = try store.load("root") {
            root = loaded
        } else {
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
            try store.save("root", certificate: certificate, key: key)
            root = (certificate, key)
            fresh = true
        }
        let intermediate: (certificate: Certificate, key: P256.Signing.PrivateKey)
        if !fresh, let loaded = try store.load("intermediate") {
            intermediate = loaded
        } else {
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
            try store.save("intermediate", certificate: certificate, key: key)
            try store.removeLeaves()
            intermediate = (certificate, key)
            fresh = true
        }
        self.root = root.certificate
        self.intermediate = intermediate.certificate
        intermediateKey = intermediate.key
        let issuers = [intermediate.certificate, root.certificate]
        let leaves = try store.loadLeaves().map { SigningKey(certificate: $0.certificate, privateKey: $0.key, issuers: issuers) }
        // Issued in file-name order (leaf-000001-…, leaf-000002-…): newest first. Their validity
        // times are whole seconds, so two leaves issued in one second could not be told apart by them.
        state = Mutex(leaves.reversed())
        _ = try current(now: now)
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
        let files = KeyFiles(directory: directory)
        let sequence = try files.leafNames().count + 1
        try files.save("leaf-\(String(repeating: "0", count: max(0, 6 - String(sequence).count)))\(sequence)-\(Self.keyID(of: certificate).prefix(8))", certificate: certificate, key: key)
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

/// The PEM files of the authority: `<name>-certificate.pem` and `<name>-key.pem` (mode 0600).
struct KeyFiles {
    let directory: URL

    func load(_ name: String) throws -> (certificate: Certificate, key: P256.Signing.PrivateKey)? {
        let certificateURL = directory.appendingPathComponent("\(name)-certificate.pem")
        let keyURL = directory.appendingPathComponent("\(name)-key.pem")
        guard FileManager.default.fileExists(atPath: certificateURL.path), FileManager.default.fileExists(atPath: keyURL.path) else { return nil }
        do {
            let certificate = try Certificate(pemEncoded: String(contentsOf: certificateURL, encoding: .utf8))
            let key = try P256.Signing.PrivateKey(pemRepresentation: String(contentsOf: keyURL, encoding: .utf8))
            guard P256.Signing.PublicKey(certificate.publicKey)?.rawRepresentation == key.publicKey.rawRepresentation else {
                throw StartupError("\(keyURL.path) is not the key of \(certificate.subject)")
            }
            return (certificate, key)
        } catch let error as StartupError {
            throw error
        } catch {
            throw StartupError("cannot read \(certificateURL.lastPathComponent) or \(keyURL.lastPathComponent) in \(directory.path): \(error)")
        }
    }

    /// The leaves' names, oldest first (`leaf-000001-…`).
    func leafNames() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasPrefix("leaf-") && $0.hasSuffix("-certificate.pem") }
            .map { String($0.dropLast("-certificate.pem".count)) }
            .sorted()
    }

    /// The leaves, oldest first.
    func loadLeaves() throws -> [(certificate: Certificate, key: P256.Signing.PrivateKey)] {
        try leafNames().compactMap { try load($0) }
    }

    func removeLeaves() throws {
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where name.hasPrefix("leaf-") {
            try FileManager.default.removeItem(at: directory.appendingPathComponent(name))
        }
    }

    /// Writes the key first (0600, through a temporary file and a rename), then the certificate: a
    /// certificate on disk always has its key.
    func save(_ name: String, certificate: Certificate, key: P256.Signing.PrivateKey) throws {
        try write(Array(key.pemRepresentation.utf8), to: "\(name)-key.pem", mode: 0o600)
        try write(Array(try certificate.serializeAsPEM().pemString.utf8), to: "\(name)-certificate.pem", mode: 0o644)
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
