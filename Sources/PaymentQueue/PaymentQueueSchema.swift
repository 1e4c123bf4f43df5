import GRDB
import StoreBusStorage
import StoreSchema

/// The payment queue's tables (see docs/payment-queue.md), with the event log's.
public enum PaymentQueueSchema {
    /// A migrator creating every table the payment queue needs.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        migrator.registerMigration("payment_queue_v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE pq_transaction (
                        id TEXT PRIMARY KEY,
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        device TEXT NOT NULL,
                        queue_key TEXT NOT NULL,
                        state INTEGER NOT NULL,
                        product_id TEXT NOT NULL,
                        product_type INTEGER NOT NULL,
                        quantity INTEGER NOT NULL,
                        application_username TEXT NOT NULL,
                        request_data BLOB NOT NULL,
                        ask_to_buy INTEGER NOT NULL,
                        storefront TEXT NOT NULL,
                        price TEXT NOT NULL,
                        currency TEXT NOT NULL,
                        error_code INTEGER,
                        error_message TEXT,
                        original_id TEXT REFERENCES pq_transaction(id),
                        policy_mode INTEGER NOT NULL,
                        policy_error INTEGER NOT NULL,
                        decide_at_ms INTEGER NOT NULL,
                        interrupted INTEGER NOT NULL DEFAULT 0,
                        resolved_by TEXT,
                        created_ms INTEGER NOT NULL,
                        date_ms INTEGER NOT NULL,
                        finished INTEGER NOT NULL DEFAULT 0
                    )
                    """)
            try db.execute(sql: "CREATE INDEX pq_transaction_queue ON pq_transaction (queue_key, finished, created_ms)")
            try db.execute(sql: "CREATE INDEX pq_transaction_account ON pq_transaction (app, account, product_id)")
            try db.execute(sql: "CREATE INDEX pq_transaction_purchasing ON pq_transaction (state, decide_at_ms)")
            try db.execute(
                sql: """
                    CREATE TABLE pq_idempotency (
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        key TEXT NOT NULL,
                        transaction_id TEXT NOT NULL REFERENCES pq_transaction(id),
                        request_digest TEXT NOT NULL,
                        PRIMARY KEY (app, account, key)
                    )
                    """)
            try db.execute(
                sql: """
                    CREATE TABLE pq_charge (
                        id INTEGER PRIMARY KEY,
                        transaction_id TEXT NOT NULL UNIQUE REFERENCES pq_transaction(id),
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        product_id TEXT NOT NULL,
                        amount TEXT NOT NULL,
                        currency TEXT NOT NULL,
                        storefront TEXT NOT NULL,
                        charged_ms INTEGER NOT NULL,
                        refunded INTEGER NOT NULL DEFAULT 0
                    )
                    """)
            try db.execute(sql: "CREATE INDEX pq_charge_account ON pq_charge (app, account, product_id)")
            try db.execute(
                sql: """
                    CREATE TABLE pq_policy (
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        mode INTEGER NOT NULL,
                        fail_error INTEGER NOT NULL,
                        delay_ms INTEGER NOT NULL,
                        restricted INTEGER NOT NULL,
                        PRIMARY KEY (app, account)
                    )
                    """)
            try db.execute(sql: "CREATE TABLE pq_sequence (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        }
        migrator.registerMigration("payment_queue_v2_restore_refund_clear") { db in
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN revoked_ms INTEGER")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN cleared INTEGER NOT NULL DEFAULT 0")
            try db.execute(
                sql: """
                    CREATE TABLE pq_restore (
                        id TEXT PRIMARY KEY,
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        device TEXT NOT NULL,
                        key TEXT NOT NULL,
                        count INTEGER NOT NULL,
                        created_ms INTEGER NOT NULL
                    )
                    """)
            try db.execute(sql: "CREATE UNIQUE INDEX pq_restore_key ON pq_restore (app, account, key) WHERE key != ''")
        }
        migrator.registerMigration("payment_queue_v3_downloads") { db in
            // Hosted content of the product, as a JSON array of storebus.payment_queue.v1.Download.
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN downloads TEXT NOT NULL DEFAULT '[]'")
        }
        migrator.registerMigration("payment_queue_v4_partial_indexes") { db in
            // Indexes of the few rows that queries look for: unfinished transactions by queue (the
            // replay, the unfinished count) and PURCHASING ones by decision time (the authority).
            // A finished or decided transaction leaves them instead of moving within them, so they
            // stay small and hot, and a commit writes fewer index pages.
            try db.execute(sql: "DROP INDEX pq_transaction_queue")
            try db.execute(sql: "CREATE INDEX pq_transaction_unfinished ON pq_transaction (queue_key, created_ms) WHERE finished = 0")
            try db.execute(sql: "DROP INDEX pq_transaction_purchasing")
            try db.execute(sql: "CREATE INDEX pq_transaction_due ON pq_transaction (decide_at_ms) WHERE state = \(Storebus_PaymentQueue_V1_TransactionState.purchasing.rawValue)")
        }
        migrator.registerMigration("payment_queue_v5_restore_digest") { db in
            // The request an idempotency key of a restore was first used for (its canonical JSON
            // without the key): the same key for another request is refused. Empty for restores
            // recorded before, and for those without a key.
            try db.execute(sql: "ALTER TABLE pq_restore ADD COLUMN request_digest TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("payment_queue_v6_replay_bytes") { db in
            // What each unfinished transaction weighs against its queue's launch-replay budget
            // (TransactionStore.replayWeight): set when it is created, here for those already waiting.
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN replay_bytes INTEGER NOT NULL DEFAULT 0")
            for id in try String.fetchAll(db, sql: "SELECT id FROM pq_transaction WHERE finished = 0") {
                if let transaction = try TransactionStore.transaction(db, id: id) {
                    try TransactionStore.setReplayWeight(db, id: id, try TransactionStore.replayWeight(transaction))
                }
            }
        }
        migrator.registerMigration("payment_queue_v7_no_charge_index") { db in
            // Charges are found through their transactions (the same app, account and product, one
            // charge per transaction): by pq_transaction_account, then pq_charge's transaction_id.
            // An index of their own cost every purchase a page write of its account's part of it,
            // a sixth of the payment queue's WAL frames under the flow benchmark.
            try db.execute(sql: "DROP INDEX pq_charge_account")
        }
        migrator.registerMigration("payment_queue_v8_revocation_reason") { db in
            // Why a refunded purchase was refunded (RevocationReason), for receipts.
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN revoked_reason INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("payment_queue_v9_subscriptions") { db in
            // Subscriptions (docs/subscriptions.md): what each transaction of one bought, the
            // subscription per account and group that renewals extend, and each app's renewal rate.
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN period TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN sub_group TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN expires_ms INTEGER")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN web_order INTEGER")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN sub_original_id TEXT")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN renewal INTEGER NOT NULL DEFAULT 0")
            try db.execute(
                sql: """
                    CREATE TABLE pq_subscription (
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        grp TEXT NOT NULL,
                        product_id TEXT NOT NULL,
                        auto_renew_product_id TEXT NOT NULL,
                        auto_renew INTEGER NOT NULL,
                        original_id TEXT NOT NULL,
                        original_ms INTEGER NOT NULL,
                        latest_id TEXT NOT NULL,
                        expires_ms INTEGER NOT NULL,
                        status INTEGER NOT NULL,
                        expiration_intent INTEGER NOT NULL DEFAULT 0,
                        renewals INTEGER NOT NULL DEFAULT 0,
                        device TEXT NOT NULL,
                        period TEXT NOT NULL,
                        price TEXT NOT NULL,
                        currency TEXT NOT NULL,
                        storefront TEXT NOT NULL,
                        PRIMARY KEY (app, account, grp)
                    )
                    """)
            // The renewal engine's question, "which periods have ended?", over active ones only.
            try db.execute(sql: "CREATE INDEX pq_subscription_due ON pq_subscription (expires_ms) WHERE status = \(Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue)")
            try db.execute(sql: "CREATE TABLE pq_renewal_rate (app TEXT PRIMARY KEY, rate INTEGER NOT NULL)")
        }
        migrator.registerMigration("payment_queue_v10_billing_retry") { db in
            // Billing retry (docs/subscriptions.md): when the next retry is due, when retrying ends,
            // when the grace period ends; and each app's sandbox billing controls.
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN retry_at_ms INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN retry_until_ms INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN grace_until_ms INTEGER NOT NULL DEFAULT 0")
            let retrying = [Storebus_PaymentQueue_V1_SubscriptionStatus.billingRetry, .gracePeriod].map { String($0.rawValue) }.joined(separator: ", ")
            try db.execute(sql: "CREATE INDEX pq_subscription_retry ON pq_subscription (retry_at_ms) WHERE status IN (\(retrying))")
            try db.execute(sql: "CREATE TABLE pq_billing (app TEXT PRIMARY KEY, billing_retry INTEGER NOT NULL, grace INTEGER NOT NULL)")
        }
        migrator.registerMigration("payment_queue_v11_known_queues") { db in
            // Queues whose device asked for its transactions: with those holding transactions, every
            // queue of an account, which revocations reach (an empty one included).
            try db.execute(sql: "CREATE TABLE pq_queue (queue_key TEXT PRIMARY KEY, app TEXT NOT NULL, account TEXT NOT NULL, device TEXT NOT NULL)")
            try db.execute(sql: "CREATE INDEX pq_queue_account ON pq_queue (app, account)")
        }
        migrator.registerMigration("payment_queue_v12_offers_and_upgrades") { db in
            // Introductory offers (docs/subscriptions.md): the product's offer when bought (its
            // IntroductoryPrice as JSON, empty when none), whether the period bought is a free trial
            // or another introductory period, and the periods of a pay-as-you-go offer still to come.
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN offer TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN trial INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN in_intro INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN intro_left INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN intro_period TEXT NOT NULL DEFAULT ''")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN intro_price TEXT NOT NULL DEFAULT ''")
            // Levels in the group (1 the highest, 0 none) of the product bought, of the product a
            // subscription runs as and of the one it renews as; a period replaced by an upgrade; the
            // part of a charge refunded pro rata.
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN sub_level INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN upgraded INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN level INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN auto_renew_level INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_charge ADD COLUMN refunded_amount TEXT NOT NULL DEFAULT ''")
        }
        migrator.registerMigration("payment_queue_v13_deliveries") { db in
            // A renewal delivered to another queue of its account than the one it is kept in (by the
            // same identifier), finished there on its own.
            try db.execute(
                sql: """
                    CREATE TABLE pq_delivery (
                        queue_key TEXT NOT NULL, id TEXT NOT NULL, app TEXT NOT NULL, account TEXT NOT NULL, device TEXT NOT NULL,
                        finished INTEGER NOT NULL, replay_bytes INTEGER NOT NULL, created_ms INTEGER NOT NULL,
                        PRIMARY KEY (queue_key, id)) WITHOUT ROWID
                    """)
            try db.execute(sql: "CREATE INDEX pq_delivery_account ON pq_delivery (app, account) WHERE finished = 0")
        }
        migrator.registerMigration("payment_queue_v14_extensions") { db in
            // Each subscription's extensions made with a request identifier, committed with the
            // extension: the same identifier again extends nothing more.
            try db.execute(
                sql: """
                    CREATE TABLE pq_extension (
                        app TEXT NOT NULL, account TEXT NOT NULL, grp TEXT NOT NULL, request_id TEXT NOT NULL, days INTEGER NOT NULL,
                        created_ms INTEGER NOT NULL, PRIMARY KEY (app, account, grp, request_id)) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("payment_queue_v15_shards") { db in
            // The shard of each transaction's and subscription's account, for the work an instance
            // does on the shards it owns (decisions, renewals, retries). A SQLite log has one shard.
            let purchasing = Storebus_PaymentQueue_V1_TransactionState.purchasing.rawValue
            let active = Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue
            let retrying = [Storebus_PaymentQueue_V1_SubscriptionStatus.billingRetry, .gracePeriod].map { String($0.rawValue) }.joined(separator: ", ")
            try db.execute(sql: "ALTER TABLE pq_transaction ADD COLUMN shard INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE pq_subscription ADD COLUMN shard INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "DROP INDEX pq_transaction_due")
            try db.execute(sql: "CREATE INDEX pq_transaction_due ON pq_transaction (shard, decide_at_ms) WHERE state = \(purchasing)")
            try db.execute(sql: "DROP INDEX pq_subscription_due")
            try db.execute(sql: "CREATE INDEX pq_subscription_due ON pq_subscription (shard, expires_ms) WHERE status = \(active)")
            try db.execute(sql: "DROP INDEX pq_subscription_retry")
            try db.execute(sql: "CREATE INDEX pq_subscription_retry ON pq_subscription (shard, retry_at_ms) WHERE status IN (\(retrying))")
        }
        return migrator
    }
}
