import Foundation
import StoreBus
import StoreBusHost
import StoreBusPostgres
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
    /// Apple's retry schedule (1, 12, 24, 48, 72 hours) times this (0.001: 3.6 s, 43 s, ...), for
    /// tests. Default: none, and the schedule runs on each app's store clock (the payment queue's
    /// renewal rate): real time in production, a month of 5 minutes in the sandbox by default (1 hour:
    /// 0.4 s, 72 hours: 30 s).
    public var webhookRetryScale: Double?
    /// Attempts in flight at once per webhook URL. Default 4.
    public var webhookConcurrencyPerURL = 4
    /// Where the notification logs and deliveries are kept: `sqlite` (a file in the data directory,
    /// the default) or `postgres` (the database `postgres` names, a database of the notification
    /// service's own): there, one instance is active and the others stand by, serving nothing until
    /// the active one's lease lapses.
    public var storage = SQLEngine.sqlite
    /// With `storage` `postgres`: the servers, role and database.
    public var postgres: PostgresSettings?
    /// How long the payment queue's events gather after a doorbell before the service reads them,
    /// in milliseconds (0 to 1000): a read, a signing call and a commit then serve several
    /// purchases, and each notification comes up to this much later. Default 10.
    public var batchMilliseconds = 10

    /// How long notifications are kept, in days (fractions allowed); older ones are pruned, oldest
    /// first, once their webhook delivery has ended. 0 keeps them all. Default 180, the window of
    /// Apple's notification history.
    public var retentionDays = 180.0
    /// Where the App Store Server API is served over HTTP, `host:port`; empty serves none. Default
    /// `127.0.0.1:7385`.
    public var httpAddress = "127.0.0.1:7385"
    /// The keys backends sign their App Store Server API requests with (none: every request is
    /// refused with 401).
    public var serverAPIKeys: [ServerAPIKey] = []

    /// A key of the App Store Server API, as App Store Connect issues one: its id (the token's
    /// `kid`), its issuer (`iss`), the apps it acts for (`bid`) and its public key, PEM inline
    /// (`publicKey`) or in a file (`publicKeyFile`).
    public struct ServerAPIKey: Sendable, Equatable, Decodable {
        public var keyId: String
        public var issuerId: String
        public var bundleIds: [String]
        public var publicKey: String?
        public var publicKeyFile: String?

        public init(keyId: String, issuerId: String, bundleIds: [String], publicKey: String? = nil, publicKeyFile: String? = nil) {
            self.keyId = keyId
            self.issuerId = issuerId
            self.bundleIds = bundleIds
            self.publicKey = publicKey
            self.publicKeyFile = publicKeyFile
        }

        enum CodingKeys: String, CodingKey { case keyId, issuerId, bundleIds, publicKey, publicKeyFile }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            keyId = try container.decode(String.self, forKey: .keyId)
            issuerId = try container.decode(String.self, forKey: .issuerId)
            bundleIds = try container.decode([String].self, forKey: .bundleIds)
            publicKey = try container.decodeIfPresent(String.self, forKey: .publicKey)
            // Relative to the config file's directory, as every path in it.
            publicKeyFile = try container.decodeIfPresent(String.self, forKey: .publicKeyFile).map { decoder.configPath($0) }
        }
    }

    /// An app's webhooks, as App Store Connect has them: production notifications go to `url`,
    /// sandbox ones to `sandboxUrl`, or to `url` when it is left out.
    public struct Webhook: Sendable, Equatable, Decodable {
        public var bundleId: String
        public var url: String
        public var sandboxUrl: String?

        public init(bundleId: String, url: String, sandboxUrl: String? = nil) {
            self.bundleId = bundleId
            self.url = url
            self.sandboxUrl = sandboxUrl
        }
    }

    /// Where and how the process serves by default: RPC on `tcp://127.0.0.1:7305`, data in
    /// `data/notifications`.
    public static let defaultHost = ServiceRegistry.notifications.defaultHost

    /// The defaults.
    public init() {}

    enum CodingKeys: String, CodingKey {
        case paymentQueueEndpoints, paymentQueueEventEndpoints, receiptEndpoints, durability, webhooks, webhookTimeoutMilliseconds, webhookRetryScale
        case webhookConcurrencyPerURL, httpAddress, serverAPIKeys, retentionDays, batchMilliseconds, storage, postgres
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
        webhookRetryScale = try container.decodeIfPresent(Double.self, forKey: .webhookRetryScale)
        webhookConcurrencyPerURL = try container.value(.webhookConcurrencyPerURL, default: defaults.webhookConcurrencyPerURL)
        httpAddress = try container.value(.httpAddress, default: defaults.httpAddress)
        serverAPIKeys = try container.value(.serverAPIKeys, default: defaults.serverAPIKeys)
        retentionDays = try container.value(.retentionDays, default: defaults.retentionDays)
        batchMilliseconds = try container.value(.batchMilliseconds, default: defaults.batchMilliseconds)
        storage = try container.value(.storage, default: defaults.storage)
        postgres = try container.decodeIfPresent(PostgresSettings.self, forKey: .postgres)
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
        if let webhookRetryScale {
            guard webhookRetryScale > 0, webhookRetryScale <= 1 else { throw StartupError("service.webhookRetryScale must be more than 0 and at most 1") }
        }
        guard (1...64).contains(webhookConcurrencyPerURL) else { throw StartupError("service.webhookConcurrencyPerURL must be from 1 to 64") }
        guard (0...1_000).contains(batchMilliseconds) else { throw StartupError("service.batchMilliseconds must be from 0 to 1000") }
        _ = try PostgresSettings.forStorage(storage, postgres)
        if !httpAddress.isEmpty { _ = try HTTPAddress(httpAddress, setting: "service.httpAddress") }
        guard retentionDays >= 0, retentionDays.isFinite else { throw StartupError("service.retentionDays must be 0 (keep every notification) or more") }
        for (index, key) in serverAPIKeys.enumerated() {
            guard !key.keyId.isEmpty, !key.issuerId.isEmpty else { throw StartupError("service.serverAPIKeys[\(index)] needs a keyId and an issuerId") }
            guard !key.bundleIds.isEmpty else { throw StartupError("service.serverAPIKeys[\(index)].bundleIds names no app") }
            guard (key.publicKey == nil) != (key.publicKeyFile == nil) else {
                throw StartupError("service.serverAPIKeys[\(index)] needs one of publicKey (PEM) and publicKeyFile")
            }
        }
        if Set(serverAPIKeys.map(\.keyId)).count != serverAPIKeys.count { throw StartupError("service.serverAPIKeys names a keyId twice") }
        for (index, webhook) in webhooks.enumerated() {
            for (name, text) in [("url", webhook.url), ("sandboxUrl", webhook.sandboxUrl)] {
                guard let text else { continue }
                guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                    throw StartupError("service.webhooks[\(index)].\(name) must be an http or https URL")
                }
            }
        }
    }
}
