import Foundation
import StoreBus
import StoreBusHost
import StoreBusStorage

/// The notification service's own settings: the config file's `service` section for
/// `storebus-notifications`. Every setting has its default here; a config file names only what it
/// changes.
public struct NotificationsConfiguration: Sendable, Equatable, Decodable {
    /// RPC endpoints of storebus-payment-queue, whose event log the notifications come from.
    /// Default `tcp://127.0.0.1:7302`.
    public var paymentQueueEndpoints = [ServiceRegistry.paymentQueue.rpcEndpoint]
    /// Doorbell endpoints of storebus-payment-queue (none: poll). Default `tcp://127.0.0.1:7312`.
    public var paymentQueueEventEndpoints = ServiceRegistry.paymentQueue.eventEndpoint.map { [$0] } ?? []
    /// RPC endpoints of storebus-receipt, which signs the notifications. Default `tcp://127.0.0.1:7303`.
    public var receiptEndpoints = [ServiceRegistry.receipt.rpcEndpoint]
    /// SQLite durability: `full` or `normal`. Default `full`: a notification a backend has read
    /// is on disk.
    public var durability = Durability.full
    /// Each app's webhook: notifications are POSTed there (an admin's SetWebhook wins over it).
    public var webhooks: [Webhook] = []
    /// How long one webhook attempt may take, in milliseconds. Default 5000.
    public var webhookTimeoutMilliseconds = 5_000
    /// Apple's retry schedule (1, 12, 24, 48, 72 hours) times this: 1 in production; a sandbox or a
    /// test shortens it (0.001: 3.6 s, 43 s, ...). Default 1.
    public var webhookRetryScale = 1.0
    /// Attempts in flight at once per webhook URL. Default 4.
    public var webhookConcurrencyPerURL = 4

    /// An app's webhook.
    public struct Webhook: Sendable, Equatable, Decodable {
        public var bundleId: String
        public var url: String

        public init(bundleId: String, url: String) {
            self.bundleId = bundleId
            self.url = url
        }
    }

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7305`, data in
    /// `data/notifications`.
    public static let defaultHost = ServiceRegistry.notifications.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case paymentQueueEndpoints, paymentQueueEventEndpoints, receiptEndpoints, durability, webhooks, webhookTimeoutMilliseconds, webhookRetryScale
        case webhookConcurrencyPerURL
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = Self()
        paymentQueueEndpoints = try container.value(.paymentQueueEndpoints, default: defaults.paymentQueueEndpoints)
        paymentQueueEventEndpoints = try container.value(.paymentQueueEventEndpoints, default: defaults.paymentQueueEventEndpoints)
        receiptEndpoints = try container.value(.receiptEndpoints, default: defaults.receiptEndpoints)
        durability = try container.value(.durability, default: defaults.durability)
        webhooks = try container.value(.webhooks, default: defaults.webhooks)
        webhookTimeoutMilliseconds = try container.value(.webhookTimeoutMilliseconds, default: defaults.webhookTimeoutMilliseconds)
        webhookRetryScale = try container.value(.webhookRetryScale, default: defaults.webhookRetryScale)
        webhookConcurrencyPerURL = try container.value(.webhookConcurrencyPerURL, default: defaults.webhookConcurrencyPerURL)
    }

    /// Throws a ``StartupError`` naming the first setting that cannot work.
    public func validate() throws {
        guard !paymentQueueEndpoints.isEmpty else {
            throw StartupError("service.paymentQueueEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard !receiptEndpoints.isEmpty else {
            throw StartupError("service.receiptEndpoints is an empty list: name at least one endpoint, or leave the key out for the default")
        }
        guard (100...60_000).contains(webhookTimeoutMilliseconds) else { throw StartupError("service.webhookTimeoutMilliseconds must be from 100 to 60000") }
        guard webhookRetryScale > 0, webhookRetryScale <= 1 else { throw StartupError("service.webhookRetryScale must be more than 0 and at most 1") }
        guard (1...64).contains(webhookConcurrencyPerURL) else { throw StartupError("service.webhookConcurrencyPerURL must be from 1 to 64") }
        for (index, webhook) in webhooks.enumerated() {
            guard let url = URL(string: webhook.url), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                throw StartupError("service.webhooks[\(index)].url must be an http or https URL")
            }
        }
    }
}
