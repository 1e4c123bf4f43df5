import AsyncHTTPClient
import Foundation
import Logging
import ServiceLifecycle
import StoreBus
import StoreBusHost
import StoreBusPostgres
import StoreBusServer
import StoreBusStorage
import StoreSchema

/// `storebus-notifications` as a service: App Store Server Notifications V2, one ordered log per app
/// made from the payment queue's event log and signed by the receipt service, served to each app's
/// backend. Its executable, a test or any program runs it the same way.
public struct NotificationsService: Service {
    /// The executable's name, in logs and Health answers.
    public static let process = ServiceRegistry.notifications.process

    let host: HostConfiguration
    let configuration: NotificationsConfiguration

    /// A notification service serving as `host` says, with `configuration`.
    public init(host: HostConfiguration, configuration: NotificationsConfiguration) {
        self.host = host
        self.configuration = configuration
    }

    /// Opens (or creates) the database, follows the payment queue's log, then serves until graceful
    /// shutdown.
    public func run() async throws {
        let host = try ServiceHost(process: Self.process, configuration: host)
        let database: any SQLDatabase
        /// On PostgreSQL: the lease of the one active instance.
        var active: ShardLeases?
        switch configuration.storage {
        case .sqlite:
            database = try StoreDatabase(
                directory: try host.dataDirectory(), name: "notifications", durability: configuration.durability, migrator: NotificationsSchema.migrator)
        case .postgres:
            let settings = try PostgresSettings.required(configuration.postgres)
            let postgres = try PostgresDatabase(settings: settings, schema: NotificationsSchema.postgres, logger: host.logger)
            let leases = try ShardLeases(
                database: postgres, logName: ActiveInstance.logName, shardCount: 1, lease: settings.lease,
                endpoints: .init(rpc: host.configuration.rpcEndpoints, events: []), logger: host.logger)
            try await ActiveInstance.standBy(leases, logger: host.logger)
            postgres.fence(leases)
            database = postgres
            active = leases
        }
        let store = NotificationStore(
            database: database, webhooks: Dictionary(configuration.webhooks.map { ($0.bundleId, $0.url) }, uniquingKeysWith: { $1 }),
            sandboxWebhooks: Dictionary(configuration.webhooks.compactMap { webhook in webhook.sandboxUrl.map { (webhook.bundleId, $0) } }, uniquingKeysWith: { $1 }))
        var http = HTTPClient.Configuration()
        http.redirectConfiguration = .disallow
        http.timeout = .init(connect: .milliseconds(Int64(min(configuration.webhookTimeoutMilliseconds, 10_000))))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: http)
        let queueClient = try RPCClient(configuration: ClientConfiguration(endpoints: configuration.paymentQueueEndpoints), reactor: host.reactor, logger: host.logger)
        let sender = WebhookSender(
            store: store, client: client, timeout: .milliseconds(Int64(configuration.webhookTimeoutMilliseconds)), retryScale: configuration.webhookRetryScale,
            perURL: configuration.webhookConcurrencyPerURL, logger: host.logger, queue: queueClient)
        let receiptClient = try RPCClient(configuration: ClientConfiguration(endpoints: configuration.receiptEndpoints), reactor: host.reactor, logger: host.logger)
        var following = EventFollower.Configuration(log: NotificationStore.followedLog, topics: NotificationFollower.topics, doorbellEndpoints: configuration.paymentQueueEventEndpoints)
        following.batchWindow = .milliseconds(Int64(configuration.batchMilliseconds))
        // Only the doorbells of its topics wake it (no call waits for its positions).
        following.topicDoorbells = true
        let follower = try EventFollower(configuration: following, client: queueClient, context: host.context, logger: host.logger)
        let notifying = NotificationFollower(
            follower: follower, log: FollowedLog(name: NotificationStore.followedLog, database: database), store: store, receipt: receiptClient, logger: host.logger)
        let handlers = NotificationsHandlers(store: store, receipt: receiptClient)
        var background: [any Service] = [notifying, sender]
        if let active { background.append(ActiveInstance(leases: active, logger: host.logger)) }
        if configuration.retentionDays > 0 {
            background.append(NotificationPruner(store: store, retention: .milliseconds(Int64(configuration.retentionDays * 86_400_000)), logger: host.logger))
        }
        if !configuration.httpAddress.isEmpty {
            let api = AppStoreServerAPI(keys: try await ServerAPIKeys(configuration.serverAPIKeys), handlers: handlers, queue: queueClient)
            background.append(
                api.application(address: try HTTPAddress(configuration.httpAddress, setting: "service.httpAddress"), logger: host.logger, bound: host.listeners.expect()))
        }
        try await host.serve(
            router: handlers.router,
            services: [Storebus_Notifications_V1_Notifications.serviceName],
            background: background,
            onShutdown: {
                await queueClient.shutdown()
                await receiptClient.shutdown()
                try? database.close()
            }
        )
    }
}

/// The lease of the one active instance of the notification service on PostgreSQL. The notification
/// logs are appended to by one writer (their positions are gapless per app), the webhooks sent by
/// one sender, and the readers waiting for new notifications woken by that writer: so one instance
/// serves at a time, and the others stand by, serving nothing, until its lease lapses (a process
/// lost or paused) and one of them takes it over. Every write holds the lease (the database's
/// fence): an instance that lost it, and woke up, writes nothing; it then ends, to start again as
/// a standby (systemd restarts it).
struct ActiveInstance: Service {
    /// The lease's name in `storebus_shard` (one shard).
    static let logName = "notifications-active"
    let leases: ShardLeases
    let logger: Logger

    /// Returns once this instance holds the lease, trying every third of the lease time.
    static func standBy(_ leases: ShardLeases, logger: Logger) async throws {
        var said = false
        while try await leases.round()[0] == nil {
            if !said {
                logger.info("Standing by: another instance of the notification service is active; this one serves once its lease lapses")
                said = true
            }
            try await Task.sleep(for: leases.lease / 3)
        }
        logger.info("Active: this instance holds the notification service's lease", metadata: ["epoch": "\(leases.epoch(of: 0) ?? 0)"])
    }

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try? await Task.sleep(for: leases.lease / 3)
                if Task.isCancelled { break }
                let held: [UInt32: UInt64]
                do {
                    held = try await leases.round()
                } catch {
                    logger.warning("The active lease was not renewed; it runs on until it lapses", metadata: ["error": "\(error)"])
                    continue
                }
                guard held[0] != nil else {
                    throw StartupError("this instance lost the notification service's lease to another: it stops, to stand by when started again")
                }
            }
        }
        try? await leases.releaseAll()
    }
}
