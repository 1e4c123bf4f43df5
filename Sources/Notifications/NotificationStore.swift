import Foundation
import GRDB
import StoreBus
import StoreBusPostgres
import StoreBusStorage
import StoreSchema

/// The notification service's tables: each app's notification log (the event log's table, keyed by
/// app, positions gapless per app), the position of the payment queue's log applied (`sb_follow`),
/// and what the rules know between events: each subscription's last state and the transactions
/// already notified.
public enum NotificationsSchema {
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        FollowedLog.registerMigration(&migrator)
        migrator.registerMigration("notifications_v1") { db in
            // Each subscription's last state (its Subscription message as JSON), by app|account|group.
            try db.execute(cached: "CREATE TABLE nt_subscription (key TEXT PRIMARY KEY, json TEXT NOT NULL) STRICT")
            // Transactions whose charge or refund was notified ("charge:<id>", "refund:<id>").
            try db.execute(cached: "CREATE TABLE nt_noted (key TEXT PRIMARY KEY) STRICT, WITHOUT ROWID")
        }
        migrator.registerMigration("notifications_v2_webhooks") { db in
            // The webhook an admin set for an app (the configuration's otherwise).
            try db.execute(cached: "CREATE TABLE nt_webhook (app TEXT PRIMARY KEY, url TEXT NOT NULL) STRICT")
            // Each notification's delivery to its webhook: queued with it, in the same transaction.
            try db.execute(
                cached: """
                    CREATE TABLE nt_delivery (
                        app TEXT NOT NULL, position INTEGER NOT NULL, url TEXT NOT NULL, state TEXT NOT NULL,
                        attempts INTEGER NOT NULL, next_ms INTEGER NOT NULL, PRIMARY KEY (app, position)) STRICT
                    """)
            try db.execute(cached: "CREATE INDEX nt_delivery_due ON nt_delivery (next_ms) WHERE state = 'PENDING'")
            // Every attempt, with Apple's sendAttemptResult.
            try db.execute(
                cached: """
                    CREATE TABLE nt_attempt (
                        app TEXT NOT NULL, position INTEGER NOT NULL, attempt INTEGER NOT NULL, at_ms INTEGER NOT NULL,
                        result TEXT NOT NULL, http_status INTEGER NOT NULL, PRIMARY KEY (app, position, attempt)) STRICT
                    """)
        }
        migrator.registerMigration("notifications_v3_test_tokens") { db in
            // Each TEST notification's token (its notificationUUID): how the App Store Server API's
            // Get Test Notification Status finds it.
            try db.execute(cached: "CREATE TABLE nt_test (token TEXT PRIMARY KEY, app TEXT NOT NULL, position INTEGER NOT NULL) STRICT")
            // The account of each transaction a notification carried (its original's too): how
            // Get Notification History finds a customer's notifications from any of its transactions.
            try db.execute(
                cached: "CREATE TABLE nt_customer (app TEXT NOT NULL, txn TEXT NOT NULL, account TEXT NOT NULL, PRIMARY KEY (app, txn)) STRICT, WITHOUT ROWID")
        }
        migrator.registerMigration("notifications_v4_delivery_urls") { db in
            // Every URL deliveries were queued for, and each URL's pending deliveries by when they
            // fall due: the sender looks URL by URL, so that one URL's backlog is never read past to
            // find another's.
            try db.execute(cached: "CREATE TABLE nt_url (url TEXT PRIMARY KEY) STRICT, WITHOUT ROWID")
            try db.execute(cached: "INSERT OR IGNORE INTO nt_url (url) SELECT DISTINCT url FROM nt_delivery")
            try db.execute(cached: "CREATE INDEX nt_delivery_url_due ON nt_delivery (url, next_ms) WHERE state = 'PENDING'")
        }
        migrator.registerMigration("notifications_v5_sandbox_webhooks") { db in
            // An app's sandbox webhook, beside its production one (empty: the configuration's).
            try db.execute(cached: "ALTER TABLE nt_webhook ADD COLUMN sandbox_url TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("notifications_v6_jws_headers") { db in
            // The header segments of the signed notifications kept in compact form (CompactJWS), by
            // the SHA-256 of each (hex).
            try db.execute(cached: "CREATE TABLE nt_jws_header (digest TEXT PRIMARY KEY, segment TEXT NOT NULL) STRICT")
        }
        return migrator
    }

    /// The same tables on PostgreSQL (a database of the notification service's own), with the event
    /// log's, the follower kit's positions, and the lease of the active instance.
    public static var postgres: PostgresSchema {
        let text = "TEXT COLLATE \"C\""
        return PostgresSchema.eventLog.adding(.followedLog).adding(
            PostgresSchema(
                service: NotificationsService.process,
                steps: [
                    (
                        "notifications_v1",
                        [
                            "CREATE TABLE nt_subscription (key \(text) PRIMARY KEY, json TEXT NOT NULL)",
                            "CREATE TABLE nt_noted (key \(text) PRIMARY KEY)",
                            "CREATE TABLE nt_webhook (app \(text) PRIMARY KEY, url TEXT NOT NULL, sandbox_url TEXT NOT NULL DEFAULT '')",
                            """
                            CREATE TABLE nt_delivery (
                                app \(text) NOT NULL, position BIGINT NOT NULL, url \(text) NOT NULL, state \(text) NOT NULL,
                                attempts BIGINT NOT NULL, next_ms BIGINT NOT NULL, PRIMARY KEY (app, position))
                            """,
                            "CREATE INDEX nt_delivery_due ON nt_delivery (next_ms) WHERE state = 'PENDING'",
                            "CREATE INDEX nt_delivery_url_due ON nt_delivery (url, next_ms) WHERE state = 'PENDING'",
                            """
                            CREATE TABLE nt_attempt (
                                app \(text) NOT NULL, position BIGINT NOT NULL, attempt BIGINT NOT NULL, at_ms BIGINT NOT NULL,
                                result \(text) NOT NULL, http_status BIGINT NOT NULL, PRIMARY KEY (app, position, attempt))
                            """,
                            "CREATE TABLE nt_test (token \(text) PRIMARY KEY, app \(text) NOT NULL, position BIGINT NOT NULL)",
                            "CREATE TABLE nt_customer (app \(text) NOT NULL, txn \(text) NOT NULL, account \(text) NOT NULL, PRIMARY KEY (app, txn))",
                            "CREATE TABLE nt_url (url \(text) PRIMARY KEY)"
                        ]
                    ),
                    ("notifications_v6_jws_headers", ["CREATE TABLE nt_jws_header (digest \(text) PRIMARY KEY, segment TEXT NOT NULL)"])
                ]))
    }
}

/// The notification log and what the rules know, in the service's database.
public struct NotificationStore: Sendable {
    /// The payment queue's log, as this service follows it.
    public static let followedLog = ServiceRegistry.paymentQueueLog

    let database: any SQLDatabase
    /// Each app's newest position, as commits reach it: ReadNotifications waits on it.
    let appended = PositionWaiter<String>()
    /// The configuration's webhooks per app (an admin's SetWebhook wins over them).
    let configuredWebhooks: WebhookURLs
    /// Rung when deliveries are queued: the webhook sender looks at once.
    let queued = PositionWaiter<String>()
    /// Writes the webhook attempts: those that end while another's commit is under way are committed
    /// with the next one together (group commit: one fsync for several attempts).
    let attempts: EventLogWriter
    /// The JWS headers its signed notifications are kept under (``CompactJWS``).
    let headers = JWSHeaders()

    /// A store over `database`; `webhooks` and `sandboxWebhooks` are the configuration's production
    /// and sandbox URLs by app.
    public init(database: any SQLDatabase, webhooks: [String: String] = [:], sandboxWebhooks: [String: String] = [:]) {
        self.database = database
        self.configuredWebhooks = WebhookURLs(production: webhooks, sandbox: sandboxWebhooks)
        attempts = EventLogWriter(logName: "webhook-attempts", database: database, publisher: nil)
    }

    /// What the rules know of the subscriptions and transactions `records` name.
    func knowledge(for records: [Storebus_PaymentQueue_V1_QueueEventRecord]) async throws -> NotificationRules {
        var subscriptionKeys = Set<String>(), notedKeys = Set<String>()
        for record in records {
            switch record.payload.event {
            case .subscriptionChanged(let changed): subscriptionKeys.insert(NotificationRules.subscriptionKey(changed.subscription))
            case .updatedTransactions(let updated):
                for transaction in updated.transactions { notedKeys.insert(NotificationRules.noted("charge", transaction.transactionIdentifier)) }
            case .refundedTransactions(let refunded):
                for transaction in refunded.transactions { notedKeys.insert(NotificationRules.noted("refund", transaction.transactionIdentifier)) }
            default: break
            }
        }
        let (subscriptions, noted) = (subscriptionKeys, notedKeys)
        return try await database.read { db in
            var rules = NotificationRules()
            for key in subscriptions {
                guard let json = try db.value(String.self, cached: "SELECT json FROM nt_subscription WHERE key = ?", arguments: [key]) else { continue }
                rules.subscriptions[key] = try Storebus_PaymentQueue_V1_Subscription(jsonString: json)
            }
            for key in noted where try db.value(Bool.self, cached: "SELECT 1 FROM nt_noted WHERE key = ?", arguments: [key]) == true {
                rules.noted.insert(key)
            }
            return rules
        }
    }

    /// Writes what the rules learnt and appends the signed notifications, in the caller's write
    /// transaction. Returns each app's newest position.
    static func write(
        _ db: any SQLConnection, learnt rules: NotificationRules, since before: NotificationRules, notifications: [Storebus_Notifications_V1_Notification],
        webhooks: WebhookURLs, environment: String, headers: JWSHeaders
    ) throws -> [String: UInt64] {
        for (key, subscription) in rules.subscriptions where before.subscriptions[key] != subscription {
            try db.execute(cached: "INSERT INTO nt_subscription (key, json) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET json = excluded.json", arguments: [key, try subscription.jsonString()])
        }
        for key in rules.noted.subtracting(before.noted) {
            try db.execute(cached: "INSERT INTO nt_noted (key) VALUES (?) ON CONFLICT (key) DO NOTHING", arguments: [key])
        }
        var heads: [String: UInt64] = [:]
        for notification in notifications {
            heads[notification.appBundleID] = try append(db, notification, webhooks: webhooks, environment: environment, headers: headers)
        }
        return heads
    }

    /// Appends a notification to its app's log, its signed payload kept in compact form when
    /// `compact` (a fast path; ``JWSHeaders/stored(_:_:compact:)``), and queues its delivery when the
    /// app has a webhook; returns its position.
    static func append(
        _ db: any SQLConnection, _ notification: Storebus_Notifications_V1_Notification, webhooks: WebhookURLs, environment: String, headers: JWSHeaders,
        compact: Bool = FastPaths.enabled
    ) throws -> UInt64 {
        var stored = notification
        stored.appBundleID = ""
        stored.signedPayload = try headers.stored(db, notification.signedPayload, compact: compact)
        let position: UInt64
        if FastPaths.enabled, let json = NotificationJSON.write(stored) {
            position = try EventLog.appendJSON(db, key: notification.appBundleID, type: Storebus_Notifications_V1_Notification.protoMessageName, payloadJSON: json).keySeq
        } else {
            position = try EventLog.append(db, key: notification.appBundleID, payload: stored).keySeq
        }
        for transaction in Set([notification.transactionID, notification.originalTransactionID]) where !transaction.isEmpty {
            try db.execute(
                cached: "INSERT INTO nt_customer (app, txn, account) VALUES (?, ?, ?) ON CONFLICT (app, txn) DO NOTHING", arguments: [notification.appBundleID, transaction, notification.accountID])
        }
        if notification.notificationType == "TEST" {
            try db.execute(cached: "INSERT INTO nt_test (token, app, position) VALUES (?, ?, ?)", arguments: [notification.notificationUuid, notification.appBundleID, Int64(position)])
        }
        if let url = try webhook(db, app: notification.appBundleID, environment: environment, configured: webhooks) {
            try db.execute(
                cached: "INSERT INTO nt_delivery (app, position, url, state, attempts, next_ms) VALUES (?, ?, ?, 'PENDING', 0, ?)",
                arguments: [notification.appBundleID, Int64(position), url, EpochMilliseconds.now])
            try db.execute(cached: "INSERT INTO nt_url (url) VALUES (?) ON CONFLICT (url) DO NOTHING", arguments: [url])
        }
        return position
    }

    /// Appends a notification made outside the followed log (TEST; a benchmark's), signed for
    /// `environment`; returns its position.
    public func append(_ notification: Storebus_Notifications_V1_Notification, environment: String = "Sandbox") async throws -> UInt64 {
        let (webhooks, headers) = (configuredWebhooks, headers)
        let position = try await database.write { db in try Self.append(db, notification, webhooks: webhooks, environment: environment, headers: headers) }
        appended.advance(notification.appBundleID, to: position)
        queued.advance("", to: UInt64(EpochMilliseconds.now))
        return position
    }

    /// The webhook `app`'s notifications of `environment` go to: an admin's, else the
    /// configuration's; a sandbox notification to the sandbox URL, else to the production one; nil
    /// for none.
    static func webhook(_ db: any SQLConnection, app: String, environment: String, configured: WebhookURLs) throws -> String? {
        let set = try db.row(cached: "SELECT url, sandbox_url FROM nt_webhook WHERE app = ?", arguments: [app])
        func nonEmpty(_ text: String?) -> String? { text.flatMap { $0.isEmpty ? nil : $0 } }
        let production = nonEmpty(set?[0]) ?? configured.production[app]
        guard environment == "Sandbox" else { return production }
        return nonEmpty(set?[1]) ?? configured.sandbox[app] ?? production
    }

    /// Tells the readers waiting how far each app's log reached, and the webhook sender that
    /// deliveries may be queued.
    func advance(_ heads: [String: UInt64]) {
        for (app, head) in heads { appended.advance(app, to: head) }
        if !heads.isEmpty { queued.advance("", to: UInt64(EpochMilliseconds.now)) }
    }

    /// Up to `limit` notifications of `app` after `position`, and the app's newest position.
    func read(app: String, after position: UInt64, limit: Int) async throws -> (notifications: [Storebus_Notifications_V1_Notification], head: UInt64) {
        let headers = headers
        return try await database.read { db in
            let events = try EventLog.read(db, key: app, after: position, limit: limit)
            let notifications = try events.map { try NotificationJSON.read($0, app: app, signedPayload: { try headers.signedPayload(db, $0) }) }
            return (notifications, try EventLog.head(db, key: app))
        }
    }

    /// Up to `limit` notifications of `app` after `position`, and the app's newest position, as a
    /// ReadNotificationsResponse's JSON (``NotificationJSON/page(_:app:head:fast:)``).
    func page(app: String, after position: UInt64, limit: Int) async throws -> [UInt8] {
        let headers = headers
        return try await database.read { db in
            try NotificationJSON.page(
                try EventLog.read(db, key: app, after: position, limit: limit), app: app, head: try EventLog.head(db, key: app),
                signedPayload: { try headers.signedPayload(db, $0) })
        }
    }

    /// The account a notification of `app` named with `transaction` (as its transaction or its
    /// original), nil when none did.
    func account(app: String, transaction: String) async throws -> String? {
        try await database.read { db in
            try db.value(String.self, cached: "SELECT account FROM nt_customer WHERE app = ? AND txn = ?", arguments: [app, transaction])
        }
    }

    /// The oldest position of `app`'s log still kept (1 when nothing was pruned; 0: none at all).
    func oldest(app: String) async throws -> UInt64 {
        try await database.read { db in try Self.oldest(db, app: app) }
    }

    static func oldest(_ db: any SQLConnection, app: String) throws -> UInt64 {
        try db.value(UInt64.self, cached: "SELECT MIN(key_seq) FROM storebus_event WHERE stream_key = ?", arguments: [app]) ?? 0
    }

    /// Deletes, for every app, the oldest notifications appended before `cutoffMS`, at most `batch`
    /// an app per call: always a prefix of the app's log (a reader after any kept position misses
    /// nothing), never its newest notification (positions go on from it), nor one whose webhook
    /// delivery is still pending, nor any after such. Their deliveries, attempts and test tokens go
    /// with them. Returns how many were deleted.
    func prune(before cutoffMS: Int64, batch: Int = 1_000) async throws -> Int {
        try await database.write { db in
            var deleted = 0
            let apps = try db.values(String.self, cached: CachedSQL("SELECT DISTINCT stream_key FROM storebus_event"))
            for app in apps {
                let head = try EventLog.head(db, key: app)
                guard head > 1 else { continue }
                let oldest = try Self.oldest(db, app: app)
                // The last position of the prefix: before the first kept for its age, its pending
                // delivery, or the head.
                let young = try db.value(UInt64.self, cached: "SELECT MIN(key_seq) FROM storebus_event WHERE stream_key = ? AND time_ms >= ?", arguments: [app, cutoffMS])
                let pending = try db.value(UInt64.self, cached: "SELECT MIN(position) FROM nt_delivery WHERE app = ? AND state = 'PENDING'", arguments: [app])
                let last = min(head - 1, (young ?? .max) - 1, (pending ?? .max) - 1, oldest + UInt64(batch) - 1)
                guard last >= oldest else { continue }
                let range: [any SQLArgument] = [app, Int64(last)]
                try db.execute(cached: "DELETE FROM storebus_event WHERE stream_key = ? AND key_seq <= ?", arguments: range)
                try db.execute(cached: "DELETE FROM nt_delivery WHERE app = ? AND position <= ?", arguments: range)
                try db.execute(cached: "DELETE FROM nt_attempt WHERE app = ? AND position <= ?", arguments: range)
                try db.execute(cached: "DELETE FROM nt_test WHERE app = ? AND position <= ?", arguments: range)
                deleted += Int(last - oldest + 1)
            }
            return deleted
        }
    }

    /// The newest position of `app`'s log (0: none).
    func head(app: String) async throws -> UInt64 {
        try await database.read { db in try EventLog.head(db, key: app) }
    }
}

/// The configuration's webhooks: production and sandbox URLs by app.
struct WebhookURLs: Sendable {
    var production: [String: String] = [:]
    var sandbox: [String: String] = [:]
}
