import StoreBusPostgres
import StoreSchema

/// The payment queue's tables on PostgreSQL: those of ``PaymentQueueSchema`` as its SQLite
/// migrations leave them, in PostgreSQL's types (integers as BIGINT, flags as 0 and 1 as in SQLite,
/// blobs as BYTEA, text compared byte by byte with the C collation, as SQLite compares it), with the
/// event log's (``PostgresSchema/eventLog``).
public enum PaymentQueuePostgresSchema {
    public static var schema: PostgresSchema {
        let purchasing = Storebus_PaymentQueue_V1_TransactionState.purchasing.rawValue
        let active = Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue
        let retrying = [Storebus_PaymentQueue_V1_SubscriptionStatus.billingRetry, .gracePeriod].map { String($0.rawValue) }.joined(separator: ", ")
        let text = "TEXT COLLATE \"C\""
        return PostgresSchema.eventLog.adding(
            PostgresSchema(
                service: PaymentQueueService.process,
                steps: [
                    (
                        "payment_queue_v1",
                        [
                            """
                            CREATE TABLE pq_transaction (
                                id \(text) PRIMARY KEY,
                                app \(text) NOT NULL,
                                account \(text) NOT NULL,
                                device \(text) NOT NULL,
                                queue_key \(text) NOT NULL,
                                state BIGINT NOT NULL,
                                product_id \(text) NOT NULL,
                                product_type BIGINT NOT NULL,
                                quantity BIGINT NOT NULL,
                                application_username \(text) NOT NULL,
                                request_data BYTEA NOT NULL,
                                ask_to_buy BIGINT NOT NULL,
                                storefront \(text) NOT NULL,
                                price \(text) NOT NULL,
                                currency \(text) NOT NULL,
                                error_code BIGINT,
                                error_message \(text),
                                original_id \(text) REFERENCES pq_transaction(id),
                                policy_mode BIGINT NOT NULL,
                                policy_error BIGINT NOT NULL,
                                decide_at_ms BIGINT NOT NULL,
                                interrupted BIGINT NOT NULL DEFAULT 0,
                                resolved_by \(text),
                                created_ms BIGINT NOT NULL,
                                date_ms BIGINT NOT NULL,
                                finished BIGINT NOT NULL DEFAULT 0,
                                revoked_ms BIGINT,
                                cleared BIGINT NOT NULL DEFAULT 0,
                                downloads \(text) NOT NULL DEFAULT '[]',
                                replay_bytes BIGINT NOT NULL DEFAULT 0,
                                revoked_reason BIGINT NOT NULL DEFAULT 0,
                                period \(text) NOT NULL DEFAULT '',
                                sub_group \(text) NOT NULL DEFAULT '',
                                expires_ms BIGINT,
                                web_order BIGINT,
                                sub_original_id \(text),
                                renewal BIGINT NOT NULL DEFAULT 0,
                                offer \(text) NOT NULL DEFAULT '',
                                trial BIGINT NOT NULL DEFAULT 0,
                                in_intro BIGINT NOT NULL DEFAULT 0,
                                sub_level BIGINT NOT NULL DEFAULT 0,
                                upgraded BIGINT NOT NULL DEFAULT 0
                            )
                            """,
                            "CREATE INDEX pq_transaction_account ON pq_transaction (app, account, product_id)",
                            "CREATE INDEX pq_transaction_unfinished ON pq_transaction (queue_key, created_ms) WHERE finished = 0",
                            "CREATE INDEX pq_transaction_due ON pq_transaction (decide_at_ms) WHERE state = \(purchasing)",
                            """
                            CREATE TABLE pq_idempotency (
                                app \(text) NOT NULL, account \(text) NOT NULL, key \(text) NOT NULL,
                                transaction_id \(text) NOT NULL REFERENCES pq_transaction(id), request_digest \(text) NOT NULL,
                                PRIMARY KEY (app, account, key)
                            )
                            """,
                            """
                            CREATE TABLE pq_charge (
                                id BIGINT PRIMARY KEY,
                                transaction_id \(text) NOT NULL UNIQUE REFERENCES pq_transaction(id),
                                app \(text) NOT NULL, account \(text) NOT NULL, product_id \(text) NOT NULL,
                                amount \(text) NOT NULL, currency \(text) NOT NULL, storefront \(text) NOT NULL,
                                charged_ms BIGINT NOT NULL, refunded BIGINT NOT NULL DEFAULT 0, refunded_amount \(text) NOT NULL DEFAULT ''
                            )
                            """,
                            """
                            CREATE TABLE pq_policy (
                                app \(text) NOT NULL, account \(text) NOT NULL, mode BIGINT NOT NULL, fail_error BIGINT NOT NULL,
                                delay_ms BIGINT NOT NULL, restricted BIGINT NOT NULL, PRIMARY KEY (app, account)
                            )
                            """,
                            "CREATE TABLE pq_sequence (name \(text) PRIMARY KEY, value BIGINT NOT NULL)",
                            """
                            CREATE TABLE pq_restore (
                                id \(text) PRIMARY KEY, app \(text) NOT NULL, account \(text) NOT NULL, device \(text) NOT NULL,
                                key \(text) NOT NULL, count BIGINT NOT NULL, created_ms BIGINT NOT NULL, request_digest \(text) NOT NULL DEFAULT ''
                            )
                            """,
                            "CREATE UNIQUE INDEX pq_restore_key ON pq_restore (app, account, key) WHERE key != ''",
                            """
                            CREATE TABLE pq_subscription (
                                app \(text) NOT NULL, account \(text) NOT NULL, grp \(text) NOT NULL,
                                product_id \(text) NOT NULL, auto_renew_product_id \(text) NOT NULL, auto_renew BIGINT NOT NULL,
                                original_id \(text) NOT NULL, original_ms BIGINT NOT NULL, latest_id \(text) NOT NULL,
                                expires_ms BIGINT NOT NULL, status BIGINT NOT NULL, expiration_intent BIGINT NOT NULL DEFAULT 0,
                                renewals BIGINT NOT NULL DEFAULT 0, device \(text) NOT NULL, period \(text) NOT NULL, price \(text) NOT NULL,
                                currency \(text) NOT NULL, storefront \(text) NOT NULL,
                                retry_at_ms BIGINT NOT NULL DEFAULT 0, retry_until_ms BIGINT NOT NULL DEFAULT 0, grace_until_ms BIGINT NOT NULL DEFAULT 0,
                                intro_left BIGINT NOT NULL DEFAULT 0, intro_period \(text) NOT NULL DEFAULT '', intro_price \(text) NOT NULL DEFAULT '',
                                level BIGINT NOT NULL DEFAULT 0, auto_renew_level BIGINT NOT NULL DEFAULT 0,
                                PRIMARY KEY (app, account, grp)
                            )
                            """,
                            "CREATE INDEX pq_subscription_due ON pq_subscription (expires_ms) WHERE status = \(active)",
                            "CREATE INDEX pq_subscription_retry ON pq_subscription (retry_at_ms) WHERE status IN (\(retrying))",
                            "CREATE TABLE pq_renewal_rate (app \(text) PRIMARY KEY, rate BIGINT NOT NULL)",
                            "CREATE TABLE pq_billing (app \(text) PRIMARY KEY, billing_retry BIGINT NOT NULL, grace BIGINT NOT NULL)",
                            "CREATE TABLE pq_queue (queue_key \(text) PRIMARY KEY, app \(text) NOT NULL, account \(text) NOT NULL, device \(text) NOT NULL)",
                            "CREATE INDEX pq_queue_account ON pq_queue (app, account)",
                            """
                            CREATE TABLE pq_delivery (
                                queue_key \(text) NOT NULL, id \(text) NOT NULL, app \(text) NOT NULL, account \(text) NOT NULL, device \(text) NOT NULL,
                                finished BIGINT NOT NULL, replay_bytes BIGINT NOT NULL, created_ms BIGINT NOT NULL,
                                PRIMARY KEY (queue_key, id)
                            )
                            """,
                            "CREATE INDEX pq_delivery_account ON pq_delivery (app, account) WHERE finished = 0",
                            """
                            CREATE TABLE pq_extension (
                                app \(text) NOT NULL, account \(text) NOT NULL, grp \(text) NOT NULL, request_id \(text) NOT NULL,
                                days BIGINT NOT NULL, created_ms BIGINT NOT NULL, PRIMARY KEY (app, account, grp, request_id)
                            )
                            """
                        ]
                    ),
                    (
                        // As SQLite's payment_queue_v15_shards: each row's shard, for the work of its owner.
                        "payment_queue_v2_shards",
                        [
                            "ALTER TABLE pq_transaction ADD COLUMN shard BIGINT NOT NULL DEFAULT 0",
                            "ALTER TABLE pq_subscription ADD COLUMN shard BIGINT NOT NULL DEFAULT 0",
                            "DROP INDEX pq_transaction_due",
                            "CREATE INDEX pq_transaction_due ON pq_transaction (shard, decide_at_ms) WHERE state = \(purchasing)",
                            "DROP INDEX pq_subscription_due",
                            "CREATE INDEX pq_subscription_due ON pq_subscription (shard, expires_ms) WHERE status = \(active)",
                            "DROP INDEX pq_subscription_retry",
                            "CREATE INDEX pq_subscription_retry ON pq_subscription (shard, retry_at_ms) WHERE status IN (\(retrying))"
                        ]
                    )
                ]))
    }
}
