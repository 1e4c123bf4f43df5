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

    /// A key.
    public init(name: String, key: String, apps: [String] = [], admin: Bool = false) {
        self.name = name
        self.key = key
        self.apps = apps
        self.admin = admin
    }

    enum CodingKeys: String, CodingKey { case name, key, apps, admin }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        key = try container.decode(String.self, forKey: .key)
        name = try container.decodeIfPresent(String.self, forKey: .name) ?? "unnamed"
        apps = try container.decodeIfPresent([String].self, forKey: .apps) ?? []
        admin = try container.decodeIfPresent(Bool.self, forKey: .admin) ?? false
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

/// One entry of the config file's `service.routes`: an upstream process, the services of the
/// contract it serves, and where its instances listen.
public struct RouteSettings: Decodable, Sendable, Equatable {
    /// A short name for logs and health answers; `catalog` and `payment-queue` name the built-in
    /// routes (an entry with one of these names replaces that route).
    public var name: String
    /// The executable that serves it (a health check counts only its answers).
    public var process: String
    /// Fully qualified service names, `storebus.catalog.v1.Catalog`: every client and admin method of
    /// these is forwarded to this upstream.
    public var services: [String]
    /// RPC endpoints of its instances.
    public var endpoints: [String]

    /// A route.
    public init(name: String, process: String, services: [String], endpoints: [String]) {
        self.name = name
        self.process = process
        self.services = services
        self.endpoints = endpoints
    }
}

/// The config file's `service` section for `storebus-gateway`.
public struct GatewaySettings: Decodable, Sendable {
    /// RPC endpoints of storebus-catalog (the `catalog` route's endpoints).
    public var catalogEndpoints: [String]?
    /// RPC endpoints of storebus-payment-queue (the `payment-queue` route's endpoints).
    public var paymentQueueEndpoints: [String]?
    /// Doorbell (PUB) endpoints of storebus-payment-queue.
    public var paymentQueueEventEndpoints: [String]?
    /// Upstreams besides, or in place of, the built-in ones (``GatewaySettings/defaultRoutes``).
    public var routes: [RouteSettings]?
    /// The secret every gateway of a deployment shares to sign sessions.
    public var sessionSecret: String?
    /// How long a session lasts. Default 3600 s.
    public var sessionLifetimeSeconds: Int?
    /// The accepted API keys.
    public var apiKeys: [APIKey]?
    /// Most Observe calls held open at once; beyond it, Observe answers at once. Default 100,000.
    public var maxParkedObservers: Int?
    /// How long an answer of a cacheable method (FetchProducts) is kept and given again for the same
    /// request of the same app, in milliseconds. Default 1000; 0 forwards every call.
    public var answerCacheMilliseconds: Int?
    /// The former name of ``answerCacheMilliseconds``, still read when that is not set.
    public var catalogCacheMilliseconds: Int?
    /// How long a forwarded call waits for an instance of its service to connect when none is
    /// connected (a service restarting or down), in milliseconds; then the caller hears UNAVAILABLE,
    /// reason NOT_SENT, with retry advice, instead of waiting for its deadline. Default 1000.
    public var upstreamConnectionWaitMilliseconds: Int?

    /// Empty settings.
    public init() {}

    /// The built-in routes: the catalog and the payment queue on their default local endpoints.
    public static let defaultRoutes: [RouteSettings] = [
        RouteSettings(name: "catalog", process: "storebus-catalog", services: ["storebus.catalog.v1.Catalog"], endpoints: ["tcp://127.0.0.1:7301"]),
        RouteSettings(
            name: "payment-queue", process: "storebus-payment-queue",
            services: ["storebus.payment_queue.v1.PaymentQueue", "storebus.payment_queue.v1.PaymentQueueAdmin"],
            endpoints: ["tcp://127.0.0.1:7302"]
        ),
    ]
    /// The payment queue's default doorbell endpoint.
    public static let defaultPaymentQueueEventEndpoints = ["tcp://127.0.0.1:7312"]
    /// The route the observer stream follows (its upstream serves the payment queue's event log).
    public static let paymentQueueRoute = "payment-queue"
    /// Default of ``answerCacheMilliseconds``.
    public static let defaultAnswerCacheMilliseconds = 1000
    /// Default of ``upstreamConnectionWaitMilliseconds``.
    public static let defaultUpstreamConnectionWaitMilliseconds = 1000

    /// The routes in effect: the built-in ones, each replaced by a configured route of the same name,
    /// then the other configured routes. Throws when a name repeats or a route lists no service or no
    /// endpoint, or when none is named ``paymentQueueRoute``.
    public func resolvedRoutes() throws -> [RouteSettings] {
        let configured = routes ?? []
        var names = Set<String>()
        for (index, route) in configured.enumerated() {
            guard names.insert(route.name).inserted else {
                throw StartupError("service.routes[\(index)]: the name \(route.name) is used twice")
            }
            guard !route.services.isEmpty else { throw StartupError("service.routes[\(index)] (\(route.name)): list at least one service") }
            guard !route.endpoints.isEmpty else { throw StartupError("service.routes[\(index)] (\(route.name)): list at least one endpoint") }
        }
        var resolved = Self.defaultRoutes.map { route in configured.first { $0.name == route.name } ?? route }
        resolved += configured.filter { route in !Self.defaultRoutes.contains { $0.name == route.name } }
        guard resolved.contains(where: { $0.name == Self.paymentQueueRoute }) else {
            throw StartupError("service.routes: no route named \(Self.paymentQueueRoute), which the observer stream follows")
        }
        return resolved
    }
}
