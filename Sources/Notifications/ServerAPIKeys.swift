import Foundation
import JWTKit
import ReceiptFormat
import StoreBus
import StoreBusHost

/// The keys an app's backend signs its App Store Server API requests with, as Apple's "In-App
/// Purchase" keys of App Store Connect: each has a key id, belongs to an issuer, and acts for some
/// apps. A request carries a JSON Web Token (ES256) in its `Authorization: Bearer` header, with
/// `kid` in its header and `iss`, `aud` "appstoreconnect-v1", `exp` and `bid` (the app) in its
/// claims, as Apple's libraries make it.
struct ServerAPIKeys: Sendable {
    /// Why a token is refused (answered 401, as Apple does, without saying which).
    struct Refusal: Error, CustomStringConvertible {
        let description: String
    }

    /// A key as the configuration names it, its public key parsed.
    struct Key: Sendable {
        let issuerID: String
        let bundleIDs: Set<String>
        let verifier: JWTKeyCollection
    }

    /// Tokens living longer than this are refused (Apple's limit: an hour).
    static let longestLife: TimeInterval = 3600
    /// Clock skew allowed between the backend and StoreBus.
    static let leeway: TimeInterval = 60

    let keys: [String: Key]

    /// Parses every key of `configured`; a ``StartupError`` naming the first that cannot be read.
    init(_ configured: [NotificationsConfiguration.ServerAPIKey]) async throws {
        var keys: [String: Key] = [:]
        for (index, entry) in configured.enumerated() {
            let pem: String
            if let inline = entry.publicKey {
                pem = inline
            } else if let file = entry.publicKeyFile {
                guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
                    throw StartupError("service.serverAPIKeys[\(index)].publicKeyFile \(file) cannot be read")
                }
                pem = text
            } else {
                throw StartupError("service.serverAPIKeys[\(index)] needs publicKey (PEM) or publicKeyFile")
            }
            let publicKey: ES256PublicKey
            do {
                publicKey = try ES256PublicKey(pem: pem)
            } catch {
                throw StartupError("service.serverAPIKeys[\(index)]: the public key is not a P-256 key in PEM (\(error))")
            }
            let verifier = JWTKeyCollection()
            await verifier.add(ecdsa: publicKey, kid: JWKIdentifier(string: entry.keyId))
            keys[entry.keyId] = Key(issuerID: entry.issuerId, bundleIDs: Set(entry.bundleIds), verifier: verifier)
        }
        self.keys = keys
    }

    /// The claims of Apple's App Store Server API tokens.
    struct Claims: JWTPayload {
        var iss: IssuerClaim
        var aud: AudienceClaim
        var exp: ExpirationClaim
        var iat: IssuedAtClaim?
        var bid: String

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired(currentDate: Date().addingTimeInterval(-ServerAPIKeys.leeway))
            try aud.verifyIntendedAudience(includes: "appstoreconnect-v1")
        }
    }

    /// The app the `Authorization` header's token acts for, once its signature, key, issuer,
    /// audience, lifetime and app are checked.
    func app(authorization: String?, now: Date = Date()) async throws(Refusal) -> String {
        guard let authorization, authorization.hasPrefix("Bearer ") else { throw Refusal(description: "no bearer token") }
        let token = String(authorization.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
        guard let kid = Self.keyID(of: token) else { throw Refusal(description: "the token's header names no key") }
        guard let key = keys[kid] else { throw Refusal(description: "unknown key \(kid)") }
        let claims: Claims
        do {
            claims = try await key.verifier.verify(token, as: Claims.self)
        } catch {
            throw Refusal(description: "the token does not verify: \(error)")
        }
        guard claims.iss.value == key.issuerID else { throw Refusal(description: "the token's issuer is not the key's") }
        if let issued = claims.iat?.value, issued.timeIntervalSince(now) > Self.leeway {
            throw Refusal(description: "the token is issued in the future")
        }
        let lifeStart = claims.iat?.value ?? now
        guard claims.exp.value.timeIntervalSince(lifeStart) <= Self.longestLife + Self.leeway else {
            throw Refusal(description: "the token lives longer than an hour")
        }
        guard key.bundleIDs.contains(claims.bid) else { throw Refusal(description: "key \(kid) does not act for \(claims.bid)") }
        return claims.bid
    }

    /// The `kid` of a compact JWT's header, read before its signature is checked (to pick the key).
    static func keyID(of token: String) -> String? {
        guard let header = token.split(separator: ".", maxSplits: 1).first, let bytes = Base64URL.decode(header),
            let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        else { return nil }
        return object["kid"] as? String
    }
}
