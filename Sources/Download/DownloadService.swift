import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusPostgres
import StoreBusServer
import StoreBusStorage
import StoreSchema

/// `storebus-download` as a service: hosted content packed from the content root as the catalog
/// names it, served in chunks to active downloads once the receipt proves the purchase. Its
/// executable, a test or any program runs it the same way.
public struct DownloadService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = "storebus-download"

    let host: HostConfiguration
    let configuration: DownloadConfiguration

    /// A download service serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: DownloadConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    /// The configuration as the service uses it (a relative content root in a config file is
    /// relative to the file, as the data directory is), validated.
    public func checkedConfiguration() throws -> DownloadConfiguration {
        var configuration = configuration
        if !configuration.contentRoot.hasPrefix("/"), let base = host.configDirectory {
            configuration.contentRoot = base.appendingPathComponent(configuration.contentRoot).standardizedFileURL.path
        }
        try configuration.validate()
        return configuration
    }

    /// Reads the catalog, makes or finds every package (a ``StartupError`` naming the product when
    /// the content differs from what the catalog announces), follows the payment queue's log, then
    /// serves until graceful shutdown.
    public func run() async throws {
        let configuration = try checkedConfiguration()
        let host = try ServiceHost(process: Self.process, configuration: host)
        let directory = try host.dataDirectory()
        let database: any SQLDatabase
        /// With several instances on PostgreSQL: the payment queue's shards they split.
        var leases: FollowerShardLeases?
        switch configuration.storage {
        case .sqlite:
            database = try StoreDatabase(directory: directory, name: "download", durability: configuration.durability, migrator: DownloadSchema.migrator)
        case .postgres:
            let settings = try PostgresSettings.required(configuration.postgres)
            let postgres = try PostgresDatabase(settings: settings, schema: DownloadSchema.postgres, logger: host.logger)
            database = postgres
            leases = FollowerShardLeases(
                database: postgres, logName: DownloadLedger.log, lease: settings.lease,
                endpoints: .init(rpc: host.configuration.rpcEndpoints, events: []), logger: host.logger)
        }
        let client = { (endpoints: [String]) in try RPCClient(configuration: ClientConfiguration(endpoints: endpoints), reactor: host.reactor, logger: host.logger) }
        let catalogClient = try client(configuration.catalogEndpoints)
        let queueClient = try client(configuration.paymentQueueEndpoints)
        let receiptClient = try client(configuration.receiptEndpoints)
        let queueRouter = try ShardRouter(any: queueClient, reactor: host.reactor, logger: host.logger)
        let shutdownClients: @Sendable () async -> Void = {
            await queueRouter.shutdown()
            for client in [catalogClient, queueClient, receiptClient] { await client.shutdown() }
        }
        // The catalog is read before serving: the clients' loop runs from now on.
        host.reactor.start()
        let content: ContentStore
        do {
            let (specs, version) = try await HostedCatalog.specs(catalog: catalogClient, wait: .seconds(configuration.catalogWaitSeconds), logger: host.logger)
            content = try ContentStore(
                contentRoot: URL(fileURLWithPath: configuration.contentRoot), directory: directory.appendingPathComponent("packages"), specs: specs
            )
            host.logger.info("Hosting", metadata: ["packages": "\(content.all.count)", "catalog.version": "\(version)", "content.root": "\(configuration.contentRoot)"])
        } catch {
            await shutdownClients()
            try? database.close()
            throw error
        }
        let ledger = try await DownloadLedger(database: database, shared: leases != nil)
        var following = EventFollower.Configuration(log: DownloadLedger.log, topics: DownloadReducer.topics, doorbellEndpoints: configuration.paymentQueueEventEndpoints)
        // Alone, purchases without hosted content wake nothing here (only the doorbells of its
        // topic do); a chunk's wait for the log's head makes it read. Among several instances,
        // others read its positions as it reaches them.
        following.topicDoorbells = leases == nil
        let follower = try EventFollower(
            configuration: following,
            client: queueClient, context: host.context, logger: host.logger
        )
        let followed = FollowedLog(name: DownloadLedger.log, database: database)
        let applied = PositionWaiter<String>()
        let shards = LogShards(log: DownloadLedger.log)
        let served = DownloadShards(
            leases: leases, endpoints: .init(rpc: host.configuration.rpcEndpoints, events: []), ledger: ledger, shards: shards, applied: applied)
        let service = DownloadHandlers(
            content: content, ledger: ledger, paymentQueue: queueRouter, receipts: ReceiptCheck(receipts: receiptClient), applied: applied, shards: shards,
            served: served
        )
        try await host.serve(
            router: service.router,
            services: [Storebus_Download_V1_Download.serviceName],
            background: [
                LogFollowerService(
                    follower: follower, log: followed, reducer: DownloadReducer(ledger: ledger), applied: applied, shards: shards, leases: leases,
                    logger: host.logger
                )
            ],
            onShutdown: {
                await shutdownClients()
                try? database.close()
            }
        )
    }
}
