import Foundation
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusPostgres
import StoreBusServer
import StoreBusStorage
import StoreSchema

/// The payment queue's own settings: the config file's `service` section for
/// `storebus-payment-queue`. Every setting has its default here; a config file names only what it
/// changes.
public struct PaymentQueueConfiguration: Sendable, Equatable, Decodable {
    /// RPC endpoints of storebus-catalog, asked for each payment's product. Default
    /// `tcp://127.0.0.1:7301`; never empty.
    public var catalogEndpoints = [ServiceRegistry.catalog.rpcEndpoint]
    /// SQLite durability: `full` (every commit synced before it is answered) or `normal` (no syncs:
    /// survives a crash of the process, not a power loss). Default `full`.
    public var durability = Durability.full
    /// How long a catalog answer is kept, in milliseconds; 0 asks on every payment. Default 1000.
    public var catalogCacheMilliseconds = 1000
    /// Sandbox policies applied at start (admin SetPaymentPolicy changes them at run time).
    public var policies: [ConfiguredPolicy] = []
    /// How fast subscriptions renew for apps without a rate of their own (Subscriptions.SetRenewalRate
    /// sets one), as RenewalRate's name: `RENEWAL_RATE_REAL_TIME` for production. Default
    /// `RENEWAL_RATE_MONTHLY_RENEWAL_EVERY_FIVE_MINUTES`, Apple's sandbox.
    public var renewalRate = RenewalClock.defaultRate
    /// Most renewals a second the renewal engine makes when a backlog has come due (each one also
    /// costs its followers: a receipt entry, a signed notification): the rest of the machine stays
    /// for purchases. 0: as fast as rounds go. Default 250 (900,000 an hour).
    public var renewalsPerSecond = RenewalEngine.defaultRenewalsPerSecond
    /// Where the queue's state and event log are kept: `sqlite` (a file in the data directory, the
    /// default) or `postgres` (the database `postgres` names, for several instances of the service).
    public var storage = SQLEngine.sqlite
    /// With `storage` `postgres`: the servers, role and database.
    public var postgres: PostgresSettings?

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7302`, doorbells on
    /// `tcp://127.0.0.1:7312`, data in `data/payment-queue`
    /// (``ServiceRegistry/paymentQueue``).
    public static let defaultHost = ServiceRegistry.paymentQueue.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey { case catalogEndpoints, durability, catalogCacheMilliseconds, policies, renewalRate, renewalsPerSecond, storage, postgres }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        catalogEndpoints = try container.value(.catalogEndpoints, default: defaults.catalogEndpoints)
        durability = try container.value(.durability, default: defaults.durability)
        catalogCacheMilliseconds = try container.value(.catalogCacheMilliseconds, default: defaults.catalogCacheMilliseconds)
        policies = try container.value(.policies, default: defaults.policies)
        renewalsPerSecond = try container.value(.renewalsPerSecond, default: defaults.renewalsPerSecond)
        storage = try container.value(.storage, default: defaults.storage)
        postgres = try container.decodeIfPresent(PostgresSettings.self, forKey: .postgres)
        if let name = try container.decodeIfPresent(String.self, forKey: .renewalRate) {
            guard let rate = RenewalClock.rate(named: name) else {
                let names = RenewalClock.rates.map(RenewalClock.name(of:)).joined(separator: ", ")
                throw DecodingError.dataCorruptedError(forKey: .renewalRate, in: container, debugDescription: "\(name) is not a renewal rate (\(names))")
            }
            renewalRate = rate
        }
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work (checked once flags and
    /// environment have had their say: a value they replace does no harm).
    public func validate() throws {
        guard !catalogEndpoints.isEmpty else {
            throw StartupError("service.catalogEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard catalogCacheMilliseconds >= 0 else { throw StartupError("service.catalogCacheMilliseconds must be 0 or more") }
        guard renewalsPerSecond >= 0 else { throw StartupError("service.renewalsPerSecond must be 0 (no limit) or more") }
        _ = try PostgresSettings.forStorage(storage, postgres)
        for (index, entry) in policies.enumerated() {
            guard !entry.app.isEmpty else { throw StartupError("service.policies[\(index)].app must not be empty") }
            do {
                // Held to the rules SetPaymentPolicy's requests are; a mode left out is APPROVE.
                var policy = entry.policy
                if policy.mode == .unspecified { policy.mode = .approve }
                try policy.checkFields(prefix: "policy.")
            } catch {
                throw StartupError("service.policies[\(index)].policy: \(error.message)")
            }
        }
    }
}

/// A sandbox policy of the configuration: `{"app": ..., "account": ... (omit for the app's default),
/// "policy": <PaymentPolicy as proto3 JSON>}`, such as `{"app": "com.example", "account": "kid",
/// "policy": {"mode": "POLICY_MODE_APPROVE", "purchasesRestricted": true}}` for an account with
/// purchase restrictions. A policy without a mode approves.
public struct ConfiguredPolicy: Sendable, Equatable, Decodable {
    /// The app.
    public var app: String
    /// The account; empty for the app's default policy.
    public var account: String
    /// The policy.
    public var policy: Storebus_PaymentQueue_V1_PaymentPolicy

    /// A policy for `account` of `app` (empty: the app's default).
    public init(app: String, account: String = "", policy: Storebus_PaymentQueue_V1_PaymentPolicy) {
        self.app = app
        self.account = account
        self.policy = policy
    }

    enum CodingKeys: String, CodingKey { case app, account, policy }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        app = try container.decode(String.self, forKey: .app)
        account = try container.value(.account, default: "")
        let json = try container.decode(JSONValue.self, forKey: .policy)
        do {
            policy = try Storebus_PaymentQueue_V1_PaymentPolicy(jsonUTF8Data: try JSONEncoder().encode(json))
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .policy, in: container, debugDescription: "not a PaymentPolicy: \(error)")
        }
    }
}

/// Any JSON value, kept to be read again by swift-protobuf (a proto message inside a config file).
enum JSONValue: Codable, Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

/// `storebus-payment-queue` as a service: the payment queues, their event log and the sandbox
/// payment authority, over its database in the host's data directory. Its executable, a test or any
/// program runs it the same way.
public struct PaymentQueueService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = "storebus-payment-queue"

    let host: HostConfiguration
    let configuration: PaymentQueueConfiguration

    /// A payment queue serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: PaymentQueueConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    /// Opens (or creates) the database, applies the configured policies, then serves until graceful
    /// shutdown (SIGINT or SIGTERM in its own process).
    public func run() async throws {
        let host = try ServiceHost(process: Self.process, configuration: host)
        let database: any SQLDatabase
        /// Where writes commit: on SQLite, the server's loop, where requests arrive and answers and
        /// doorbells leave; on PostgreSQL, a thread of the writer's (each commit waits for the server).
        let commitLoop: Reactor?
        /// On PostgreSQL, the log's shards and this instance's share of them.
        var leases: ShardLeases?
        let publisher = try host.makePublisher()
        switch configuration.storage {
        case .sqlite:
            // A thread of its own syncs the commits (see WALSyncer): the loop that commits goes on
            // with the next writes meanwhile.
            database = try StoreDatabase(
                directory: try host.dataDirectory(), name: "payment-queue",
                durability: configuration.durability, syncThread: true, migrator: PaymentQueueSchema.migrator
            )
            commitLoop = host.reactor
        case .postgres:
            let settings = try PostgresSettings.required(configuration.postgres)
            let postgres = try PostgresDatabase(settings: settings, schema: PaymentQueuePostgresSchema.schema, logger: host.logger)
            // Several instances share the log's shards by leases; each writes only to those it
            // owns (see ShardLeases). Its first share is taken before it serves.
            let shards = try ShardLeases(
                database: postgres, logName: TransactionStore.logName, shardCount: settings.shards, lease: settings.lease,
                endpoints: .init(rpc: host.configuration.rpcEndpoints, events: publisher?.boundEndpoints ?? []), logger: host.logger)
            postgres.shard(shards)
            try await shards.round()
            leases = shards
            database = postgres
            commitLoop = nil
        }
        let shardOf: @Sendable (String) -> UInt32 = { [leases] key in leases?.shard(ofKey: key) ?? 0 }
        let store = TransactionStore(
            writer: EventLogWriter(logName: TransactionStore.logName, database: database, publisher: publisher, failPoints: host.failPoints, reactor: commitLoop, shardOf: shardOf))
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: configuration.catalogEndpoints), reactor: host.reactor, logger: host.logger)
        for entry in configuration.policies {
            var policy = entry.policy
            if policy.mode == .unspecified { policy.mode = .approve }
            try await store.setPolicy(policy, app: entry.app, account: entry.account)
        }
        try await store.setRenewalRate(configuration.renewalRate, app: "")
        let authority = PaymentAuthority(store: store, logger: host.logger)
        let renewals = RenewalEngine(store: store, renewalsPerSecond: configuration.renewalsPerSecond, logger: host.logger)
        let eventLog = try EventLogHandlers(database: database, logName: TransactionStore.logName, topics: QueueTopic.names)
        var router = eventLog.router
        let catalog = CatalogLookup(client: catalogClient, maxAge: .milliseconds(configuration.catalogCacheMilliseconds))
        router.register(PaymentQueueHandlers(store: store, catalog: catalog, authority: authority))
        let queueShards = QueueShards(leases: leases, endpoints: .init(rpc: host.configuration.rpcEndpoints, events: publisher?.boundEndpoints ?? []))
        router.register(PaymentQueueAdminHandlers(store: store, catalog: catalog, authority: authority, shards: queueShards, eventLog: eventLog))
        router.register(SubscriptionsHandlers(store: store, catalog: catalog, engine: renewals))
        try await host.serve(
            router: router,
            services: ServiceRegistry.paymentQueue.services + [Storebus_Eventlog_V1_EventLog.serviceName],
            background: [authority, renewals]
                + (leases.map {
                    [
                        LeaseKeeper(leases: $0) {
                            authority.poke()
                            renewals.poke()
                        }
                    ]
                } ?? []),
            publisher: publisher,
            onShutdown: {
                await catalogClient.shutdown()
                try? database.close()
            }
        )
    }
}

/// Keeps a sharded log's leases (``ShardLeases/run(taken:)``) until the process stops, then lets go
/// of them at once; a shard taken over wakes the loops that do its due work.
struct LeaseKeeper: Service {
    let leases: ShardLeases
    let taken: @Sendable () -> Void

    func run() async throws {
        await cancelWhenGracefulShutdown { await leases.run(taken: taken) }
    }
}
