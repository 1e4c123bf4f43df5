import GRDB
import StoreBusStorage

/// The receipt service's tables, in its own database (`receipt.sqlite`). It never opens the payment
/// queue's: everything here comes from that service's event log.
enum ReceiptSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("receipt_v1") { db in
            // The position of the last event of each followed log applied, committed with its effects
            // (moved to the follower kit's sb_follow by the migration below).
            try db.execute(sql: "CREATE TABLE rc_follow (log TEXT PRIMARY KEY, seq INTEGER NOT NULL) STRICT")
            // Every purchased or restored transaction, as its latest event left it. Failed and pending
            // payments never reach a receipt and are not kept.
            try db.execute(
                sql: """
                    CREATE TABLE rc_transaction (
                        id TEXT PRIMARY KEY,
                        app TEXT NOT NULL,
                        account TEXT NOT NULL,
                        device TEXT NOT NULL,
                        product_id TEXT NOT NULL,
                        product_type INTEGER NOT NULL,
                        quantity INTEGER NOT NULL,
                        state INTEGER NOT NULL,
                        purchase_ms INTEGER NOT NULL,
                        original_id TEXT NOT NULL,
                        original_purchase_ms INTEGER NOT NULL,
                        expires_ms INTEGER,
                        cancellation_ms INTEGER,
                        cancellation_reason INTEGER NOT NULL DEFAULT 0,
                        trial INTEGER NOT NULL DEFAULT 0,
                        finished INTEGER NOT NULL DEFAULT 0,
                        cleared INTEGER NOT NULL DEFAULT 0,
                        storefront TEXT NOT NULL,
                        application_username TEXT NOT NULL,
                        price TEXT NOT NULL,
                        currency TEXT NOT NULL,
                        seq INTEGER NOT NULL
                    ) STRICT
                    """)
            try db.execute(sql: "CREATE INDEX rc_transaction_account ON rc_transaction (app, account, purchase_ms, id)")
            // When each account first had each app (the receipt's original purchase date).
            try db.execute(
                sql: """
                    CREATE TABLE rc_account (
                        app TEXT NOT NULL, account TEXT NOT NULL, first_ms INTEGER NOT NULL,
                        PRIMARY KEY (app, account)
                    ) STRICT, WITHOUT ROWID
                    """)
            // The opaque value of each device's receipts, and the account it belongs to: how a
            // receipt sent to VerifyReceipt is traced back to its account. `revoked` marks the
            // opaque values of sandbox receipts issued revoked (ReceiptProperties.is_revoked).
            try db.execute(
                sql: """
                    CREATE TABLE rc_device (
                        opaque BLOB PRIMARY KEY, app TEXT NOT NULL, account TEXT NOT NULL, device TEXT NOT NULL,
                        revoked INTEGER NOT NULL DEFAULT 0
                    ) STRICT
                    """)
            try db.execute(sql: "CREATE UNIQUE INDEX rc_device_queue ON rc_device (app, account, device) WHERE revoked = 0")
        }
        FollowedLog.registerMigration(&migrator, replacing: "rc_follow")
        migrator.registerMigration("receipt_v2_periods") { db in
            // A subscription period's own billing line (PaymentTransaction.web_order_line_item_id):
            // each renewal has its own. NULL for purchases recorded before, and for other products.
            try db.execute(sql: "ALTER TABLE rc_transaction ADD COLUMN web_order INTEGER")
            // Whether the store made it renewing a subscription (transactionReason RENEWAL), and the
            // subscription group of an auto-renewable subscription's purchase.
            try db.execute(sql: "ALTER TABLE rc_transaction ADD COLUMN renewal INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "ALTER TABLE rc_transaction ADD COLUMN sub_group TEXT NOT NULL DEFAULT ''")
            // An auto-renewable subscription's renewal state, from the payment queue's
            // subscription_changed events (auto-renew turned off or on, expiry): a subscription
            // without a row renews as its latest purchase.
            try db.execute(
                sql: """
                    CREATE TABLE rc_subscription (
                        app TEXT NOT NULL, account TEXT NOT NULL, grp TEXT NOT NULL, original_id TEXT NOT NULL,
                        auto_renew INTEGER NOT NULL, auto_renew_product_id TEXT NOT NULL, status INTEGER NOT NULL,
                        expiration_intent INTEGER NOT NULL, seq INTEGER NOT NULL,
                        PRIMARY KEY (app, account, grp)
                    ) STRICT
                    """)
        }
        migrator.registerMigration("receipt_v3_grace") { db in
            // A subscription's grace period end, while in one (its customer stays entitled).
            try db.execute(sql: "ALTER TABLE rc_subscription ADD COLUMN grace_until_ms INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("receipt_v4_intro_upgraded") { db in
            // Whether the period bought is an introductory offer paid as you go or up front (1719).
            try db.execute(sql: "ALTER TABLE rc_transaction ADD COLUMN intro INTEGER NOT NULL DEFAULT 0")
            // Whether an upgrade replaced the period before its end (is_upgraded).
            try db.execute(sql: "ALTER TABLE rc_transaction ADD COLUMN upgraded INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("receipt_v5_entry") { db in
            // Each purchase's receipt attribute (type 17) as DER, made when its row changes
            // (ReceiptStore.encodeEntry): a receipt copies them rather than encoding its account's
            // whole history again. NULL (rows from before): encoded when a receipt needs it.
            try db.execute(sql: "ALTER TABLE rc_transaction ADD COLUMN entry BLOB")
        }
        migrator.registerMigration("receipt_v6_held") { db in
            // The purchases an account's receipt holds (ReceiptStore.held), by account: a receipt
            // reads those, not every consumable the account ever bought and finished (the account
            // index walked them all, so a receipt's cost grew with the account's history).
            try db.execute(sql: ReceiptStore.heldIndexSQL)
        }
        return migrator
    }
}
