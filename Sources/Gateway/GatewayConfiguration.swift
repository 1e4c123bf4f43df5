import Foundation
import StoreBus
import StoreBusHost

/// An upstream of the gateway as configured: a process, the services of the contract it serves,
/// and where its instances listen.
public struct RouteConfiguration: Decodable, Sendable, Equatable {
    /// A short name for logs and health answers; the names of ``ServiceRegistry``'s entries
    /// (`catalog`, `payment-queue`, ...) name the built-in routes (a configured route of one of these
    /// names replaces that route).
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

/// The gateway's own settings: the config file's `service` section for `storebus-gateway`. Every
/// setting has its default here; a config file names only what it changes.
public struct GatewayConfiguration: Sendable, Decodable {
    /// The upstreams calls are forwarded to. Default: ``defaultRoutes``. In the config file,
    /// `routes` lists routes to add, or to put in place of a built-in one of the same name, and each
    /// built-in route's `<name>Endpoints` key (`catalogEndpoints`, `paymentQueueEndpoints`, ...;
    /// ``ServiceEntry/endpointsKey``) sets its endpoints.
    public var routes = Self.defaultRoutes
    /// Doorbell (PUB) endpoints of storebus-payment-queue, whose log the observer stream follows.
    /// Default `tcp://127.0.0.1:7312`.
    public var paymentQueueEventEndpoints = ServiceRegistry.paymentQueue.eventEndpoint.map { [$0] } ?? []
    /// The secret every gateway of a deployment shares to sign sessions. Default none: a random one,
    /// so that sessions work on this process only (it says so in a warning).
    public var sessionSecret: String?
    /// How long a session lasts, in seconds: 1 to a year. Default 3600.
    public var sessionLifetimeSeconds = 3600
    /// The accepted API keys. Default none: every client is refused (it says so in a warning).
    public var apiKeys: [APIKey] = []
    /// Most Observe calls held open at once; beyond it, Observe answers at once. Default 100,000.
    public var maxParkedObservers = 100_000
    /// How long an answer of a cacheable method (FetchProducts) is kept and given again for the same
    /// request of the same app, in milliseconds; 0 forwards every call. Default 1000. The config
    /// file's former name for it, `catalogCacheMilliseconds`, is still read.
    public var answerCacheMilliseconds = 1000
    /// How long a forwarded call waits for an instance of its service to connect when none is
    /// connected (restarting, down), in milliseconds; then the caller hears UNAVAILABLE, reason
    /// NOT_SENT, with retry advice, instead of waiting for its deadline. Default 1000.
    public var upstreamConnectionWaitMilliseconds = 1000

    /// The built-in routes: every upstream of the gateway's row in ``ServiceRegistry`` (the catalog,
    /// the payment queue, the receipt and the download service) on its default local endpoint.
    public static let defaultRoutes: [RouteConfiguration] = ServiceRegistry.upstreamsOfGateway.map { entry in
        RouteConfiguration(name: entry.name, process: entry.process, services: entry.services, endpoints: [entry.rpcEndpoint])
    }
    /// The route the observer stream follows (its upstream serves the event log the gateway's row
    /// follows).
    public static let paymentQueueRoute = ServiceRegistry.gateway.follows ?? ServiceRegistry.paymentQueue.name

    /// Where the gateway serves by default: `tcp://127.0.0.1:7300`.
    public static let defaultHost = ServiceRegistry.gateway.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case routes, paymentQueueEventEndpoints, sessionSecret, sessionLifetimeSeconds
        case apiKeys, maxParkedObservers, answerCacheMilliseconds, catalogCacheMilliseconds, upstreamConnectionWaitMilliseconds
    }

    /// A built-in route's `<name>Endpoints` key.
    struct EndpointsKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        var named = Set<String>()
        for (index, route) in try container.value(.routes, default: [RouteConfiguration]()).enumerated() {
            guard named.insert(route.name).inserted else { throw StartupError("service.routes[\(index)]: the name \(route.name) is used twice") }
            guard !route.services.isEmpty else { throw StartupError("service.routes[\(index)] (\(route.name)): list at least one service") }
            if let existing = routes.firstIndex(where: { $0.name == route.name }) {
                routes[existing] = route
            } else {
                routes.append(route)
            }
        }
        let endpointKeys = try decoder.container(keyedBy: EndpointsKey.self)
        for entry in ServiceRegistry.upstreamsOfGateway {
            if let endpoints = try endpointKeys.decodeIfPresent([String].self, forKey: EndpointsKey(stringValue: entry.endpointsKey)) {
                setEndpoints(endpoints, of: entry.name)
            }
        }
        paymentQueueEventEndpoints = try container.value(.paymentQueueEventEndpoints, default: defaults.paymentQueueEventEndpoints)
        sessionSecret = try container.decodeIfPresent(String.self, forKey: .sessionSecret)
        sessionLifetimeSeconds = try container.value(.sessionLifetimeSeconds, default: defaults.sessionLifetimeSeconds)
        apiKeys = try container.value(.apiKeys, default: defaults.apiKeys)
        maxParkedObservers = try container.value(.maxParkedObservers, default: defaults.maxParkedObservers)
        answerCacheMilliseconds =
            try container.decodeIfPresent(Int.self, forKey: .answerCacheMilliseconds)
            ?? container.value(.catalogCacheMilliseconds, default: defaults.answerCacheMilliseconds)
        upstreamConnectionWaitMilliseconds = try container.value(.upstreamConnectionWaitMilliseconds, default: defaults.upstreamConnectionWaitMilliseconds)
    }

    /// Sets the endpoints of the route named `name`, if there is one.
    public mutating func setEndpoints(_ endpoints: [String], of name: String) {
        if let index = routes.firstIndex(where: { $0.name == name }) { routes[index].endpoints = endpoints }
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work (checked once flags and
    /// environment have had their say: a value they replace does no harm).
    public func validate() throws {
        var names = Set<String>()
        for route in routes {
            guard names.insert(route.name).inserted else { throw StartupError("service.routes: the name \(route.name) is used twice") }
            guard !route.endpoints.isEmpty else {
                let key = ServiceRegistry.upstreamsOfGateway.first { $0.name == route.name }?.endpointsKey ?? "routes (\(route.name)).endpoints"
                throw StartupError("service.\(key) is an empty list: name at least one endpoint, or leave the key out for the default")
            }
        }
        guard routes.contains(where: { $0.name == Self.paymentQueueRoute }) else {
            throw StartupError("service.routes: no route named \(Self.paymentQueueRoute), which the observer stream follows")
        }
        guard !paymentQueueEventEndpoints.isEmpty else {
            throw StartupError("service.paymentQueueEventEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard (1...GatewayHandlers.maxSessionLifetimeSeconds).contains(sessionLifetimeSeconds) else {
            throw StartupError("service.sessionLifetimeSeconds must be from 1 to \(GatewayHandlers.maxSessionLifetimeSeconds) (a year)")
        }
        guard maxParkedObservers >= 0 else { throw StartupError("service.maxParkedObservers must be 0 or more") }
        guard answerCacheMilliseconds >= 0 else { throw StartupError("service.answerCacheMilliseconds must be 0 or more") }
        guard upstreamConnectionWaitMilliseconds >= 0 else { throw StartupError("service.upstreamConnectionWaitMilliseconds must be 0 or more") }
        _ = try APIKeyring(apiKeys)
    }
}
