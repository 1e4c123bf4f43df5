import Crypto
import Foundation

/// A session: who a client is, signed by the gateways' shared secret.
///
/// The gateway keeps no session table. The token a client gets from Authenticate carries its app,
/// account, device, key and expiry, with an HMAC-SHA256 over them; any gateway holding the same
/// secret accepts it, so a client can move between gateways, and a restarted gateway knows its
/// clients at once. Form: `v1.<base64url JSON claims>.<base64url MAC>`.
public struct SessionClaims: Codable, Sendable, Equatable {
    /// The app.
    public var app: String
    /// The account.
    public var account: String
    /// The device.
    public var device: String
    /// The API key it was opened with, by ``APIKeyring/identifier(of:)`` (a digest of the secret, not
    /// the secret). Each use looks the key up again: a key removed or replaced ends its sessions, and
    /// a key's current role and apps apply.
    public var key: String
    /// Expiry, in seconds since 1970.
    public var expires: Int64

    /// Claims.
    public init(app: String, account: String, device: String, key: String, expires: Int64) {
        self.app = app
        self.account = account
        self.device = device
        self.key = key
        self.expires = expires
    }
}

/// Signs and checks session tokens.
public struct SessionSigner: Sendable {
    /// The MAC key, derived from the secret (kept as bytes: SymmetricKey is not Sendable).
    private let keyBytes: Data

    /// A signer with the gateways' shared secret.
    public init(secret: String) {
        keyBytes = Data(SHA256.hash(data: Data(secret.utf8)))
    }

    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// The token for `claims`.
    public func token(for claims: SessionClaims) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body = (try? encoder.encode(claims)) ?? Data()
        let payload = "v1." + Self.base64URL(body)
        let mac = HMAC<SHA256>.authenticationCode(for: Data(payload.utf8), using: key)
        return payload + "." + Self.base64URL(Data(mac))
    }

    /// Why a token is refused.
    public enum Refusal: Error, Equatable {
        /// Not a token at all, or signed with another secret.
        case forged
        /// Past its expiry.
        case expired
    }

    /// The claims of a token signed with this secret and not yet expired.
    public func claims(of token: String, now: Date = Date()) throws(Refusal) -> SessionClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", let mac = Self.data(base64URL: parts[2]),
            let body = Self.data(base64URL: parts[1])
        else { throw .forged }
        let payload = Data("\(parts[0]).\(parts[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: key) else { throw .forged }
        guard let claims = try? JSONDecoder().decode(SessionClaims.self, from: body) else { throw .forged }
        guard Int64(now.timeIntervalSince1970) < claims.expires else { throw .expired }
        return claims
    }

    static func base64URL(_ data: Data) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity((data.count + 2) / 3 * 4)
        for byte in data.base64EncodedData() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): bytes.append(UInt8(ascii: "_"))
            case UInt8(ascii: "="): continue
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func data(base64URL text: Substring) -> Data? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "/"))
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil // not base64url
            default: bytes.append(byte)
            }
        }
        while bytes.count % 4 != 0 { bytes.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(bytes))
    }
}
