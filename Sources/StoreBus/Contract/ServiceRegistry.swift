import StoreSchema

/// One process of a StoreBus deployment, as everything that lists services sees it: the gateway's
/// upstreams, the services' default endpoints, `storectl health` and `storectl keys`, and the test
/// that holds the Makefile, deploy/local and deploy/systemd to this table (`ServiceRegistryTests`).
public struct ServiceEntry: Sendable, Hashable {
    /// The short name: logs, health answers, key files, configuration keys (`payment-queue`).
    public let name: String
    /// The executable (`storebus-payment-queue`).
    public let process: String
    /// The contract services it serves, fully qualified (`storebus.payment_queue.v1.PaymentQueue`);
    /// the gateway forwards their client and admin methods to it. None for the console, which
    /// serves people over HTTP (and Health).
    public let services: [String]
    /// The loopback port it serves RPC on by default.
    public let rpcPort: Int
    /// The loopback port of its event log's doorbells by default, when it keeps a log.
    public let eventPort: Int?
    /// The names of the entries it calls.
    public let upstreams: [String]
    /// The name of the entry whose event log it follows, if any.
    public let follows: String?
    /// Whether it keeps data of its own (by default in `data/<name>`).
    public let keepsData: Bool

    /// An entry; see the properties.
    public init(
        name: String, process: String, services: [String], rpcPort: Int, eventPort: Int? = nil, upstreams: [String] = [],
        follows: String? = nil, keepsData: Bool = false
    ) {
        self.name = name
        self.process = process
        self.services = services
        self.rpcPort = rpcPort
        self.eventPort = eventPort
        self.upstreams = upstreams
        self.follows = follows
        self.keepsData = keepsData
    }

    /// Its default RPC endpoint, `tcp://127.0.0.1:<rpcPort>`.
    public var rpcEndpoint: String { "tcp://127.0.0.1:\(rpcPort)" }
    /// Its default doorbell endpoint, when it keeps a log.
    public var eventEndpoint: String? { eventPort.map { "tcp://127.0.0.1:\($0)" } }
    /// Its default data directory, `data/<name>`, when it keeps data.
    public var dataDirectory: String? { keepsData ? "data/\(name)" : nil }

    /// The configuration key naming its RPC endpoints in the configurations of the processes that
    /// call it: `paymentQueueEndpoints`.
    public var endpointsKey: String { camelName + "Endpoints" }
    /// The configuration key naming its doorbell endpoints: `paymentQueueEventEndpoints`.
    public var eventEndpointsKey: String { camelName + "EventEndpoints" }

    /// Its name in environment variables: `PAYMENT_QUEUE`.
    public var environmentName: String { String(name.uppercased().map { $0 == "-" ? "_" : $0 }) }

    private var camelName: String {
        let parts = name.split(separator: "-")
        return parts.enumerated().map { index, part in index == 0 ? String(part) : part.prefix(1).uppercased() + part.dropFirst() }.joined()
    }
}

/// StoreBus's processes, one row each, in the order a deployment starts them (each after those it
/// calls). Adding a service is a library, a thin executable, its .proto and a row here; the gateway
/// then routes its client and admin methods, and the tools list it.
public enum ServiceRegistry {
    /// Products, storefronts, prices, hosted content.
    public static let catalog = ServiceEntry(
        name: "catalog", process: "storebus-catalog", services: [Storebus_Catalog_V1_Catalog.serviceName], rpcPort: 7301
    )
    /// Transactions and their state machine, the sandbox authority; keeps the event log.
    public static let paymentQueue = ServiceEntry(
        name: "payment-queue", process: "storebus-payment-queue",
        services: [
            Storebus_PaymentQueue_V1_PaymentQueue.serviceName, Storebus_PaymentQueue_V1_PaymentQueueAdmin.serviceName,
            Storebus_PaymentQueue_V1_Subscriptions.serviceName
        ],
        rpcPort: 7302, eventPort: 7312, upstreams: ["catalog"], keepsData: true
    )
    /// Signed receipts, verification, entitlements; follows the payment queue's log.
    public static let receipt = ServiceEntry(
        name: "receipt", process: "storebus-receipt", services: [Storebus_Receipt_V1_Receipt.serviceName], rpcPort: 7303,
        upstreams: ["catalog", "payment-queue"], follows: "payment-queue", keepsData: true
    )
    /// Hosted content; follows the payment queue's log.
    public static let download = ServiceEntry(
        name: "download", process: "storebus-download", services: [Storebus_Download_V1_Download.serviceName], rpcPort: 7304,
        upstreams: ["catalog", "payment-queue", "receipt"], follows: "payment-queue", keepsData: true
    )
    /// App Store Server Notifications for apps' backends; follows the payment queue's log, signed by
    /// the receipt service.
    public static let notifications = ServiceEntry(
        name: "notifications", process: "storebus-notifications", services: [Storebus_Notifications_V1_Notifications.serviceName], rpcPort: 7305,
        upstreams: ["payment-queue", "receipt"], follows: "payment-queue", keepsData: true
    )
    /// The clients' one endpoint; serves the observer stream from the payment queue's log.
    public static let gateway = ServiceEntry(
        name: "gateway", process: "storebus-gateway", services: [Storebus_Gateway_V1_Gateway.serviceName], rpcPort: 7300,
        upstreams: ["catalog", "payment-queue", "receipt", "download", "notifications"], follows: "payment-queue"
    )

    /// The operators' web page (StoreBus's console): serves no contract service of its own, only
    /// HTTP pages and Health; every page reads, and every action acts, through the gateway as an
    /// admin session.
    public static let console = ServiceEntry(
        name: "console", process: "storebus-console", services: [], rpcPort: 7306, upstreams: ["gateway"]
    )

    /// The payment queue's event log, named after it: what its writer, its followers (receipt,
    /// download) and the gateway's observer stream all call it.
    public static var paymentQueueLog: String { paymentQueue.name }

    /// Every entry, in start order.
    public static let all: [ServiceEntry] = [catalog, paymentQueue, receipt, download, notifications, gateway, console]

    /// The entry named `name`.
    public static func named(_ name: String) -> ServiceEntry? {
        all.first { $0.name == name }
    }

    /// The entries the gateway forwards to: every one but itself.
    public static var upstreamsOfGateway: [ServiceEntry] {
        gateway.upstreams.compactMap(named)
    }
}
