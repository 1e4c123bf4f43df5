import AsyncHTTPClient
import Foundation
import ServiceLifecycle
import StoreBus
import StoreBusHost
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
        let database = try StoreDatabase(
            directory: try host.dataDirectory(), name: "notifications", durability: configuration.durability, migrator: NotificationsSchema.migrator)
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
        let follower = try EventFollower(configuration: following, client: queueClient, context: host.context, logger: host.logger)
        let notifying = NotificationFollower(
            follower: follower, log: FollowedLog(name: NotificationStore.followedLog, database: database), store: store, receipt: receiptClient, logger: host.logger)
        let handlers = NotificationsHandlers(store: store, receipt: receiptClient)
        var background: [any Service] = [notifying, sender]
        if configuration.retentionDays > 0 {
            background.append(NotificationPruner(store: store, retention: .milliseconds(Int64(configuration.retentionDays * 86_400_000)), logger: host.logger))
        }
        if !configuration.httpAddress.isEmpty {
            let api = AppStoreServerAPI(keys: try await ServerAPIKeys(configuration.serverAPIKeys), handlers: handlers, queue: queueClient)
            background.append(api.application(address: try HTTPAddress(configuration.httpAddress, setting: "service.httpAddress"), logger: host.logger))
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
