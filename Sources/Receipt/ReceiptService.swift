import Foundation
import Logging
import ReceiptFormat
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusPostgres
import StoreBusServer
import StoreBusStorage
import StoreSchema

/// `storebus-receipt` as a service: receipts, signed transactions, verification and entitlements,
/// kept in its own database from the payment queue's event log. Its executable, a test or any
/// program runs it the same way.
public struct ReceiptService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = "storebus-receipt"

    let host: HostConfiguration
    let configuration: ReceiptConfiguration

    /// A receipt service serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: ReceiptConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    /// Opens (or creates) the database and the certificate authority, follows the payment queue's
    /// log, then serves until graceful shutdown.
    public func run() async throws {
        let host = try ServiceHost(process: Self.process, configuration: host)
        let database: any SQLDatabase
        let authority: SigningAuthority
        /// With several instances on PostgreSQL: the payment queue's shards they split.
        var leases: FollowerShardLeases?
        switch configuration.storage {
        case .sqlite:
            let directory = try host.dataDirectory()
            database = try StoreDatabase(directory: directory, name: "receipt", durability: configuration.durability, migrator: ReceiptSchema.migrator)
            authority = try SigningAuthority(directory: directory.appendingPathComponent("keys"), leafValidityDays: configuration.leafValidityDays)
        case .postgres:
            let settings = try PostgresSettings.required(configuration.postgres)
            let postgres = try PostgresDatabase(settings: settings, schema: ReceiptPostgresSchema.schema, logger: host.logger)
            database = postgres
            authority = try SigningAuthority(store: PostgresKeyStore(database: postgres), leafValidityDays: configuration.leafValidityDays)
            leases = FollowerShardLeases(
                database: postgres, logName: ReceiptStore.log, lease: settings.lease,
                endpoints: .init(rpc: host.configuration.rpcEndpoints, events: []), logger: host.logger)
        }
        let store = ReceiptStore(database: database)
        let applied = PositionWaiter<String>()
        let queueClient = try RPCClient(configuration: ClientConfiguration(endpoints: configuration.paymentQueueEndpoints), reactor: host.reactor, logger: host.logger)
        let shards = LogShards(log: ReceiptStore.log)
        let book = ReceiptBook(store: store, authority: authority, configuration: configuration, applied: applied, shards: shards, head: LogHead(client: queueClient))
        let catalogClient = try RPCClient(configuration: ClientConfiguration(endpoints: configuration.catalogEndpoints), reactor: host.reactor, logger: host.logger)
        var following = EventFollower.Configuration(log: ReceiptStore.log, topics: ReceiptReducer.topics, doorbellEndpoints: configuration.paymentQueueEventEndpoints)
        following.batchWindow = .milliseconds(Int64(configuration.batchMilliseconds))
        // Alone, only the doorbells of its topics wake it; calls waiting for a position make it
        // read. Among several instances, others read its positions as it reaches them.
        following.topicDoorbells = leases == nil
        let follower = try EventFollower(configuration: following, client: queueClient, context: host.context, logger: host.logger)
        let leaf = try authority.current()
        host.logger.info(
            "Signing",
            metadata: [
                "environment": "\(configuration.environment.rawValue)",
                "root": "\(authority.root.subject)",
                "leaf": "\(SigningAuthority.keyID(of: leaf.certificate))"
            ])
        var background: [any Service] = [
            LogFollowerService(
                follower: follower, log: FollowedLog(name: ReceiptStore.log, database: database), reducer: ReceiptReducer(), applied: applied, shards: shards,
                leases: leases, logger: host.logger
            )
        ]
        if leases != nil {
            // Leaves another instance issued (a rotation, a renewal) are signed with here too.
            background.append(KeyReloader(authority: authority, logger: host.logger))
        }
        if !configuration.httpAddress.isEmpty {
            background.append(
                VerifyReceiptHTTP.application(
                    book: book, address: try HTTPAddress(configuration.httpAddress, setting: "service.httpAddress"), logger: host.logger, bound: host.listeners.expect()))
        }
        try await host.serve(
            router: ReceiptHandlers(book: book, catalog: CatalogLookup(client: catalogClient)).router,
            services: [Storebus_Receipt_V1_Receipt.serviceName],
            background: background,
            onShutdown: {
                await queueClient.shutdown()
                await catalogClient.shutdown()
                try? database.close()
            }
        )
    }
}

/// Reads the signing authority's leaves again every ``interval``, for instances sharing one store.
struct KeyReloader: Service {
    let authority: SigningAuthority
    let logger: Logger
    static let interval = Duration.seconds(2)

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.interval)
                if Task.isCancelled { break }
                do {
                    try authority.reload()
                } catch {
                    logger.warning("Reading the signing keys again failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
