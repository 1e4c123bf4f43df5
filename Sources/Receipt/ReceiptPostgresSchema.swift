import StoreBusPostgres

/// The receipt service's tables on PostgreSQL: those of ``ReceiptSchema`` as its SQLite migrations
/// leave them, in PostgreSQL's types (integers as BIGINT, flags as 0 and 1, blobs as BYTEA, text
/// compared byte by byte), with the follower kit's positions, the leases its instances split the
/// payment queue's shards by, and the signing authority's keys (kept in files on SQLite).
enum ReceiptPostgresSchema {
    static var schema: PostgresSchema {
        let text = "TEXT COLLATE \"C\""
        return PostgresSchema.shardLeases.adding(.followedLog).adding(
            PostgresSchema(
                service: ReceiptService.process,
                steps: [
                    (
                        "receipt_v1",
                        [
                            """
                            CREATE TABLE rc_transaction (
                                id \(text) PRIMARY KEY,
                                app \(text) NOT NULL,
                                account \(text) NOT NULL,
                                device \(text) NOT NULL,
                                product_id \(text) NOT NULL,
                                product_type BIGINT NOT NULL,
                                quantity BIGINT NOT NULL,
                                state BIGINT NOT NULL,
                                purchase_ms BIGINT NOT NULL,
                                original_id \(text) NOT NULL,
                                original_purchase_ms BIGINT NOT NULL,
                                expires_ms BIGINT,
                                cancellation_ms BIGINT,
                                cancellation_reason BIGINT NOT NULL DEFAULT 0,
                                trial BIGINT NOT NULL DEFAULT 0,
                                finished BIGINT NOT NULL DEFAULT 0,
                                cleared BIGINT NOT NULL DEFAULT 0,
                                storefront \(text) NOT NULL,
                                application_username \(text) NOT NULL,
                                price \(text) NOT NULL,
                                currency \(text) NOT NULL,
                                seq BIGINT NOT NULL,
                                web_order BIGINT,
                                renewal BIGINT NOT NULL DEFAULT 0,
                                sub_group \(text) NOT NULL DEFAULT '',
                                intro BIGINT NOT NULL DEFAULT 0,
                                upgraded BIGINT NOT NULL DEFAULT 0,
                                entry BYTEA
                            )
                            """,
                            "CREATE INDEX rc_transaction_account ON rc_transaction (app, account, purchase_ms, id)",
                            "CREATE TABLE rc_account (app \(text) NOT NULL, account \(text) NOT NULL, first_ms BIGINT NOT NULL, PRIMARY KEY (app, account))",
                            """
                            CREATE TABLE rc_device (
                                opaque BYTEA PRIMARY KEY, app \(text) NOT NULL, account \(text) NOT NULL, device \(text) NOT NULL,
                                revoked BIGINT NOT NULL DEFAULT 0
                            )
                            """,
                            "CREATE UNIQUE INDEX rc_device_queue ON rc_device (app, account, device) WHERE revoked = 0",
                            """
                            CREATE TABLE rc_subscription (
                                app \(text) NOT NULL, account \(text) NOT NULL, grp \(text) NOT NULL, original_id \(text) NOT NULL,
                                auto_renew BIGINT NOT NULL, auto_renew_product_id \(text) NOT NULL, status BIGINT NOT NULL,
                                expiration_intent BIGINT NOT NULL, seq BIGINT NOT NULL, grace_until_ms BIGINT NOT NULL DEFAULT 0,
                                PRIMARY KEY (app, account, grp)
                            )
                            """,
                            // The certificate authority (SigningAuthority): every instance signs with
                            // the same root and intermediate, and any leaf one of them issued.
                            """
                            CREATE TABLE rc_signing_key (
                                name \(text) PRIMARY KEY, certificate_pem TEXT NOT NULL, key_pem TEXT NOT NULL, created_ms BIGINT NOT NULL
                            )
                            """
                        ]
                    ),
                    ("receipt_v2_held", [ReceiptStore.heldIndexSQL])
                ]))
    }
}
