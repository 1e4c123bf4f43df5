import StoreBus
import StoreBusServer
import StoreSchema

/// A process the gateway forwards calls to (all its instances, behind one client), and the services
/// of the contract it serves.
public struct GatewayUpstream: Sendable {
    /// A short name for logs and health answers, `catalog`.
    public var name: String
    /// The executable that serves it, `storebus-catalog`: a health check counts only an answer from it.
    public var process: String
    /// The fully qualified names of the services it serves, `storebus.catalog.v1.Catalog`.
    public var services: [String]
    /// The client of its instances.
    public var client: RPCClient
    /// For the payment queue: the router sending each account's calls to the instance owning its
    /// shard (``ShardRouter``); nil for the others, whose instances are alike.
    public var router: ShardRouter?

    /// An upstream serving `services` through `client` (and `router`, when its instances split shards).
    public init(name: String, process: String, services: [String], client: RPCClient, router: ShardRouter? = nil) {
        self.name = name
        self.process = process
        self.services = services
        self.client = client
        self.router = router
    }

    /// Its health check, for the gateway's Health/Check: whether its own process answers SERVING.
    public var health: HealthUpstream {
        HealthUpstream(name: name, process: process, services: services, client: client)
    }
}

/// What the gateway answers for each method path, read from the contract's generated descriptors
/// (``StoreBusContract``) and the routing configuration: client and admin methods of the services an
/// upstream serves are forwarded to it; internal methods of every service are refused. The gateway
/// keeps no list of methods of its own.
struct ForwardingTable {
    /// A forwarded method and the upstream it goes to.
    struct Route {
        var method: AnyMethodDescriptor
        var upstream: GatewayUpstream
    }

    /// Services the gateway answers itself: its own, and Health, which every process serves.
    static let ownServices: Set<String> = [Storebus_Gateway_V1_Gateway.serviceName, Storebus_Health_V1_Health.serviceName]

    /// The forwarded methods, in the order of the upstreams and their services.
    let routes: [Route]
    /// Internal methods of the contract's services (those the gateway answers itself aside): refused.
    let refused: [AnyMethodDescriptor]

    /// The table for `upstreams`. Throws for a service the contract does not have, one the gateway
    /// answers itself, or one that two upstreams name.
    init(upstreams: [GatewayUpstream], contract: [ContractService] = StoreBusContract.services) throws {
        // The contract's services by name, each with its methods; those the gateway answers itself aside.
        var methodsOf: [String: [AnyMethodDescriptor]] = [:]
        var names: [String] = []
        for service in contract where !Self.ownServices.contains(service.name) {
            methodsOf[service.name] = service.methods
            names.append(service.name)
        }
        var routes: [Route] = []
        var routed: [String: String] = [:]
        for upstream in upstreams {
            for name in upstream.services {
                guard !Self.ownServices.contains(name) else {
                    throw StartupError("upstream \(upstream.name): the gateway answers \(name) itself")
                }
                guard let methods = methodsOf[name] else {
                    throw StartupError("upstream \(upstream.name): the contract has no service \(name) (services: \(names.joined(separator: ", ")))")
                }
                if let other = routed.updateValue(upstream.name, forKey: name) {
                    throw StartupError("the service \(name) is routed to both \(other) and \(upstream.name)")
                }
                for method in methods where method.access != .internal {
                    routes.append(Route(method: method, upstream: upstream))
                }
            }
        }
        var refused: [AnyMethodDescriptor] = []
        for name in names {
            for method in methodsOf[name] ?? [] where method.access == .internal { refused.append(method) }
        }
        self.routes = routes
        self.refused = refused
    }

    /// The paths a session may call: the gateway's own client methods, then the forwarded ones its
    /// key allows (a server key: the server methods alone; an admin key: all).
    func allowedPaths(for key: APIKey) -> [String] {
        let own = Storebus_Gateway_V1_Gateway.methods.filter { $0.access == .client && !(key.server && $0.path == Storebus_Gateway_V1_Gateway.observe.path) }
        return own.map(\.path) + routes.filter { Self.allows(key, $0.method.access) }.map(\.method.path)
    }

    /// Whether sessions of `key` may call forwarded methods of `access`.
    static func allows(_ key: APIKey, _ access: MethodAccess) -> Bool {
        switch access {
        case .client: return !key.server
        case .server: return key.server || key.admin
        case .admin: return key.admin
        case .internal: return false
        }
    }
}
