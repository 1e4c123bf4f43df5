import Crypto
import Foundation
import StoreBus

/// An API key the gateway accepts, from the `service.apiKeys` list of its config file.
public struct APIKey: Decodable, Sendable, Equatable {
    /// A name for logs and sessions (the key itself is never logged).
    public var name: String
    /// The secret the client presents.
    public var key: String
    /// Apps the key may act for; empty or `["*"]` for any app.
    public var apps: [String]
    /// Whether the key opens admin sessions (PaymentQueueAdmin, catalog reloads).
    public var admin: Bool
    /// Whether the key is an app's server key (its own backend): it opens server sessions, which act
    /// for the app alone (no account, no device) and call the server methods (the notification
    /// stream), not a device's.
    public var server: Bool

    /// A key.
    public init(name: String, key: String, apps: [String] = [], admin: Bool = false, server: Bool = false) {
        self.name = name
        self.key = key
        self.apps = apps
        self.admin = admin
        self.server = server
    }

    enum CodingKeys: String, CodingKey { case name, key, apps, admin, server }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decode(String.self, forKey: .key)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? "unnamed"
        apps = try container.decodeIfPresent([String].self, forKey: .apps) ?? []
        admin = try container.decodeIfPresent(Bool.self, forKey: .admin) ?? false
        server = try container.decodeIfPresent(Bool.self, forKey: .server) ?? false
    }

    /// Whether the key may act for `app`.
    public func allows(app: String) -> Bool {
        apps.isEmpty || apps.contains("*") || apps.contains(app)
    }
}

/// The keys a gateway accepts, found by a digest of the key so that lookups do not compare secrets
/// character by character.
public struct APIKeyring: Sendable {
    private let byDigest: [String: APIKey]

    /// A keyring; refuses empty, short or repeated keys, repeated names, and admin keys limited to
    /// some apps (admin methods act across apps and on the whole deployment).
    public init(_ keys: [APIKey]) throws {
        var byDigest: [String: APIKey] = [:]
        var names = Set<String>()
        for (index, key) in keys.enumerated() {
            guard key.key.utf8.count >= 16 else {
                throw StartupError("service.apiKeys[\(index)] (\(key.name)): a key needs at least 16 characters")
            }
            guard names.insert(key.name).inserted else {
                throw StartupError("service.apiKeys[\(index)]: the name \(key.name) is used twice")
            }
            guard !key.admin || key.allows(app: "*") else {
                throw StartupError("service.apiKeys[\(index)] (\(key.name)): an admin key acts for every app; remove its \"apps\" list or its \"admin\" flag")
            }
            guard !key.server || (!key.admin && !key.apps.isEmpty && !key.apps.contains("*")) else {
                throw StartupError("service.apiKeys[\(index)] (\(key.name)): a server key acts for the apps it lists, and is not an admin key: give it an \"apps\" list")
            }
            guard byDigest.updateValue(key, forKey: Self.digest(key.key)) == nil else {
                throw StartupError("service.apiKeys[\(index)] (\(key.name)): the same key is listed twice")
            }
        }
        self.byDigest = byDigest
    }

    /// The key entry for a presented secret.
    public func key(for secret: String) -> APIKey? {
        byDigest[Self.digest(secret)]
    }

    /// The identifier sessions carry for a key: its secret's SHA-256 digest (hex), which names the
    /// key without revealing it.
    public static func identifier(of key: APIKey) -> String { digest(key.key) }

    /// The key a session's identifier names, if it is still configured.
    public func key(identifier: String) -> APIKey? { byDigest[identifier] }

    /// How many keys there are.
    public var count: Int { byDigest.count }

    private static func digest(_ secret: String) -> String {
        SHA256.hash(data: Data(secret.utf8)).map { String(format: "%02x", $0) }.joined()
    }
}
