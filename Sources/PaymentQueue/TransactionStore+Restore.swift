import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

extension TransactionStore {
    /// restoreCompletedTransactions: for every non-consumable and auto-renewable subscription the
    /// account bought (its first purchase: not a renewal, a resubscription or a non-consumable bought
    /// again; with that applicationUsername, when given), a new RESTORED transaction in the
    /// requesting queue pointing at the original, then restoreCompletedTransactionsFinished with the
    /// count (0 is a definite answer). Restoring twice restores twice. When the account's policy is
    /// FAIL, the sandbox fails the restore instead: nothing is restored and the queue hears
    /// restoreCompletedTransactionsFailedWithError with the policy's error (count 0).
    ///
    /// With an idempotency key, a retry of the same request (`digest`) returns the first restore's
    /// answer, whatever came of it and whatever the policy is now, and restores nothing more; the key
    /// used for a different request is FAILED_PRECONDITION. One database transaction.
    public func restore(
        queue: Storebus_PaymentQueue_V1_QueueRef, applicationUsername: String?, idempotency: (key: String, digest: String)? = nil, now: Date = Date()
    ) async throws -> (restoreID: String, count: Int) {
        let maxUnfinished = self.maxUnfinished
        return try await writer.write { db, batch in
            try batch.requireOwner(key: queue.key)
            if let idempotency, let recorded = try Self.keyedRestore(db, key: idempotency.key, app: queue.appBundleID, account: queue.accountID, digest: idempotency.digest) {
                return recorded
            }
            let (policy, _) = try Self.policy(db, app: queue.appBundleID, account: queue.accountID)
            if policy.mode == .fail {
                let restoreID = try Self.recordRestore(db, queue: queue, shard: batch.shard(ofKey: queue.key), idempotency: idempotency, count: 0, now: now)
                try batch.appendQueueEvent(
                    key: queue.key,
                    Storebus_PaymentQueue_V1_QueueEvent.with {
                        $0.queue = queue
                        $0.restoreCompletedTransactionsFailed = .with {
                            $0.restoreID = restoreID
                            $0.error = .make(policy.failError)
                        }
                    })
                return (restoreID, 0)
            }
            let nowMS = Self.milliseconds(now)
            var sql = """
                SELECT id FROM pq_transaction
                WHERE app = ? AND account = ? AND state = ? AND product_type IN (?, ?) AND original_id IS NULL
                  AND (sub_original_id IS NULL OR sub_original_id = id) AND (revoked_ms IS NULL OR upgraded = 1) AND cleared = 0
                """
            var arguments: [any SQLArgument] = [
                queue.appBundleID, queue.accountID, Storebus_PaymentQueue_V1_TransactionState.purchased.rawValue,
                Storebus_Catalog_V1_ProductType.nonConsumable.rawValue, Storebus_Catalog_V1_ProductType.autoRenewableSubscription.rawValue
            ]
            if let applicationUsername {
                sql += " AND application_username = ?"
                arguments += [applicationUsername]
            }
            let originals = try db.values(String.self, cached: CachedSQL(sql + " ORDER BY created_ms, id"), arguments: arguments)
            let load = try Self.unfinishedLoad(db, queueKey: queue.key)
            // Refused before anything is written when the count alone is too many; the weight is known
            // once the transactions are (the savepoint undoes them when there is no room).
            try Self.checkRoom(load, adding: originals.count, bytes: 0, maxUnfinished: maxUnfinished, doing: "restoring \(originals.count) transactions")
            var restored: [Storebus_PaymentQueue_V1_PaymentTransaction] = []
            let shard = batch.shard(ofKey: queue.key)
            for original in originals {
                let id = try Self.nextIdentifier(db, shard: shard)
                try db.execute(
                    cached: """
                        INSERT INTO pq_transaction (id, app, account, device, queue_key, state, product_id, product_type, quantity,
                            application_username, request_data, ask_to_buy, storefront, price, currency, original_id,
                            policy_mode, policy_error, decide_at_ms, created_ms, date_ms, downloads, shard)
                        SELECT ?, app, account, ?, ?, ?, product_id, product_type, quantity,
                            application_username, request_data, 0, storefront, price, currency, id, policy_mode, 0, ?, ?, ?, downloads, shard
                        FROM pq_transaction WHERE id = ?
                        """,
                    arguments: [
                        id, queue.deviceID, queue.key, Storebus_PaymentQueue_V1_TransactionState.restored.rawValue,
                        nowMS, nowMS, nowMS, original
                    ])
                try Self.offerDownloadsAfresh(db, id: id)
                restored.append(try Self.transaction(db, id: id)!)
            }
            // Each restored transaction carries its original's payment as well as its own.
            let weights = try restored.map(Self.replayWeight)
            try Self.checkRoom(load, adding: restored.count, bytes: weights.reduce(0, +), maxUnfinished: maxUnfinished, doing: "restoring \(restored.count) transactions")
            for (transaction, weight) in zip(restored, weights) {
                try Self.setReplayWeight(db, id: transaction.transactionIdentifier, weight)
            }
            let restoreID = try Self.recordRestore(db, queue: queue, shard: shard, idempotency: idempotency, count: restored.count, now: now)
            for chunk in Self.eventSized(restored) {
                try Self.announce(&batch, key: queue.key, chunk, queue: queue)
            }
            try batch.appendQueueEvent(
                key: queue.key,
                Storebus_PaymentQueue_V1_QueueEvent.with {
                    $0.queue = queue
                    $0.restoreCompletedTransactionsFinished = .with {
                        $0.restoreID = restoreID
                        $0.restoredCount = UInt32(restored.count)
                    }
                })
            return (restoreID, restored.count)
        }
    }

    /// Every queue of an account (`?`, `?`, twice): those that hold its transactions and those that
    /// asked for theirs (``noteQueue(_:)``), so that a device with an empty queue hears what the
    /// account loses too.
    static let accountQueuesSQL: CachedSQL = """
        SELECT app, account, device, queue_key FROM pq_transaction WHERE app = ? AND account = ?
        UNION SELECT app, account, device, queue_key FROM pq_queue WHERE app = ? AND account = ?
        ORDER BY queue_key
        """

    /// Remembers that `queue` exists (its device asked for its transactions), once: every queue of
    /// its account hears revocations, the empty ones included. Written outside the event log: a
    /// queue known changes no queue's events.
    public func noteQueue(_ queue: Storebus_PaymentQueue_V1_QueueRef) async throws {
        let key = queue.key
        guard !knownQueues.withLock({ $0.contains(key) }) else { return }
        try await database.write { db in
            try db.execute(
                cached: "INSERT INTO pq_queue (queue_key, app, account, device) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING", arguments: [key, queue.appBundleID, queue.accountID, queue.deviceID])
        }
        knownQueues.withLock { known in
            // A bound on the memory: past it, a queue asks again (one more insert that does nothing).
            if known.count >= 100_000 { known.removeAll() }
            known.insert(key)
        }
    }

    /// The answer of the restore made under an idempotency key, if there was one. The key used for a
    /// different request (`digest`) is FAILED_PRECONDITION; a restore recorded before keys were tied
    /// to their request (no digest) matches any.
    public func restore(forKey key: String, app: String, account: String, digest: String) async throws -> (restoreID: String, count: Int)? {
        try await database.read { db in try Self.keyedRestore(db, key: key, app: app, account: account, digest: digest) }
    }

    static func keyedRestore(_ db: any SQLConnection, key: String, app: String, account: String, digest: String) throws -> (restoreID: String, count: Int)? {
        guard
            let row = try db.row(
                cached: "SELECT id, count, request_digest FROM pq_restore WHERE app = ? AND account = ? AND key = ?",
                arguments: [app, account, key])
        else {
            return nil
        }
        let recorded: String = row["request_digest"]
        guard recorded.isEmpty || recorded == digest else {
            throw RPCError(.failedPrecondition, "idempotency key \"\(key)\" was already used for a different restore")
                .withReason("IDEMPOTENCY_KEY_REUSED", domain: "storebus.payment_queue")
        }
        return (row["id"], row["count"])
    }

    /// Records a restore (with its key and request digest, when it has a key) and returns its new id.
    static func recordRestore(
        _ db: any SQLConnection, queue: Storebus_PaymentQueue_V1_QueueRef, shard: UInt32, idempotency: (key: String, digest: String)?, count: Int, now: Date
    ) throws -> String {
        let restoreID = "restore-" + (try nextIdentifier(db, shard: shard))
        try db.execute(
            cached: "INSERT INTO pq_restore (id, app, account, device, key, request_digest, count, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [restoreID, queue.appBundleID, queue.accountID, queue.deviceID, idempotency?.key ?? "", idempotency?.digest ?? "", count, milliseconds(now)])
        return restoreID
    }

    /// Refunds a PURCHASED transaction: its charge is marked refunded, its cancellation date set, and
    /// for non-consumables and subscriptions every queue of the account hears that the entitlement is
    /// revoked (didRevokeEntitlementsForProductIdentifiers), unless another paid, unrefunded purchase
    /// still holds the product. The purchases made while the account held it (never charged) and
    /// their restored copies are revoked with it. A purchase that was never charged cannot be
    /// refunded (FAILED_PRECONDITION). Refunding twice changes nothing.
    ///
    /// Every transaction the refund cancels (the purchase, its restored copies, the purchases that
    /// stood on it) is announced with its cancellation date and `reason` in a `refundedTransactions`
    /// event on its own queue, for followers that keep receipts.
    public func refund(
        _ id: String, reason: Storebus_PaymentQueue_V1_RevocationReason = .unspecified, now: Date = Date()
    ) async throws -> (transaction: Storebus_PaymentQueue_V1_PaymentTransaction, charge: Storebus_PaymentQueue_V1_Charge?, revoked: [String]) {
        try await writer.write { db, batch in
            guard let record = try TransactionRecord.fetch(db, id: id) else {
                throw TransactionStateMachine.unknown(id)
            }
            try batch.requireOwner(shard: record.shard)
            if case .refused(let predicate) = TransactionStateMachine.step(record.state, .refund, record.machineFacts) {
                throw TransactionStateMachine.refusal(id, predicate)
            }
            guard try db.value(Bool.self, cached: "SELECT EXISTS (SELECT 1 FROM pq_charge WHERE transaction_id = ?)", arguments: [id]) == true else {
                throw RPCError(.failedPrecondition, "transaction \(id) was never charged (the account already held the product when it was bought): refund the purchase that was")
            }
            let product = record.productID
            var revokes = record.productType == .nonConsumable || record.productType == .autoRenewableSubscription
            if record.revokedMS == nil {
                let nowMS = Self.milliseconds(now)
                var cancelled = try db.values(
                    String.self, cached: "SELECT id FROM pq_transaction WHERE (id = ? OR original_id = ?) AND revoked_ms IS NULL ORDER BY created_ms, id", arguments: [id, id])
                try db.execute(cached: "UPDATE pq_transaction SET revoked_ms = ?, revoked_reason = ? WHERE id = ? OR original_id = ?", arguments: [nowMS, reason.rawValue, id, id])
                try db.execute(cached: "UPDATE pq_charge SET refunded = 1 WHERE transaction_id = ?", arguments: [id])
                if record.productType == .autoRenewableSubscription {
                    // A subscription is held by its running period: refunding that one revokes the
                    // subscription (status 5, no more renewals); refunding an earlier one revokes nothing.
                    revokes = try Self.revokeSubscription(db, &batch, of: record)
                } else if revokes {
                    if try Self.holds(db, app: record.app, account: record.account, product: product) {
                        revokes = false
                    } else {
                        // Purchases made while the product was held were never charged and stood on
                        // this one: they lose it too, with their restored copies.
                        let rebuys = """
                            WITH rebuys AS (
                                SELECT id FROM pq_transaction t
                                WHERE app = ? AND account = ? AND product_id = ? AND original_id IS NULL AND state = ? AND cleared = 0
                                  AND NOT EXISTS (SELECT 1 FROM pq_charge c WHERE c.transaction_id = t.id))
                            """
                        let standing = "revoked_ms IS NULL AND cleared = 0 AND (id IN (SELECT id FROM rebuys) OR original_id IN (SELECT id FROM rebuys))"
                        let purchased = Storebus_PaymentQueue_V1_TransactionState.purchased.rawValue
                        cancelled += try db.values(
                            String.self, cached: "\(rebuys) SELECT id FROM pq_transaction WHERE \(standing) ORDER BY created_ms, id",
                            arguments: [record.app, record.account, product, purchased])
                        try db.execute(
                            cached: "\(rebuys) UPDATE pq_transaction SET revoked_ms = ?, revoked_reason = ? WHERE \(standing)",
                            arguments: [record.app, record.account, product, purchased, nowMS, reason.rawValue])
                    }
                }
                var refundedByQueue: [String: [Storebus_PaymentQueue_V1_PaymentTransaction]] = [:]
                for cancelledID in cancelled {
                    guard let refunded = try TransactionRecord.fetch(db, id: cancelledID) else { continue }
                    refundedByQueue[refunded.queueKey, default: []].append(try refunded.transaction(db))
                }
                for (key, transactions) in refundedByQueue.sorted(by: { $0.key < $1.key }) {
                    for chunk in Self.eventSized(transactions) {
                        try batch.appendQueueEvent(
                            key: key,
                            Storebus_PaymentQueue_V1_QueueEvent.with {
                                $0.queue = chunk[0].queue
                                $0.refundedTransactions.transactions = chunk
                            })
                    }
                }
                if revokes {
                    let queues = try db.rows(cached: Self.accountQueuesSQL, arguments: [record.app, record.account, record.app, record.account])
                    for queueRow in queues {
                        let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                            $0.appBundleID = queueRow["app"]
                            $0.accountID = queueRow["account"]
                            $0.deviceID = queueRow["device"]
                        }
                        try batch.appendQueueEvent(
                            key: queueRow["queue_key"],
                            Storebus_PaymentQueue_V1_QueueEvent.with {
                                $0.queue = queue
                                $0.revokedEntitlements = .with {
                                    $0.productIdentifiers = [product]
                                    $0.transactionIdentifiers = [id]
                                    $0.revokedAt = .init(date: now)
                                }
                            })
                    }
                }
            }
            let charge = try db.row(cached: "SELECT * FROM pq_charge WHERE transaction_id = ?", arguments: [id]).map(Self.charge)
            return (try Self.transaction(db, id: id)!, charge, revokes ? [product] : [])
        }
    }

    /// The sandbox's "clear purchase history": the account's transactions no longer count as held or
    /// restorable, unfinished ones leave their queues (removed events) and held entitlements are
    /// revoked. The ledger is kept. Returns how many transactions were cleared.
    public func clear(app: String, account: String, now: Date = Date()) async throws -> Int {
        try await writer.write { db, batch in
            try batch.requireOwner(shard: ShardHash.shard(app: app, account: account, count: self.shardCount))
            return try Self.clear(db, &batch, app: app, account: account, now: now)
        }
    }

    /// Reset of the whole sandbox: every account is cleared (its queues hear removed and revoked
    /// events, so followers stay consistent), then every transaction, key, charge, restore and policy
    /// is deleted. The event log is never rewound and identifiers (of transactions, restores and
    /// charges) keep counting up, so nothing issued before a reset is ever issued again.
    public func reset(now: Date = Date()) async throws {
        try await writer.write { db, batch in
            for row in try db.rows(cached: "SELECT DISTINCT app, account FROM pq_transaction ORDER BY app, account") {
                _ = try Self.clear(db, &batch, app: row["app"], account: row["account"], now: now)
            }
            // The ledger is emptied, but its last charge id is kept for the next charge to count on from.
            try db.execute(cached: Self.chargeFloorSQL)
            for table in ["pq_idempotency", "pq_charge", "pq_restore", "pq_transaction", "pq_policy"] {
                try db.execute(cached: "DELETE FROM \(table)")
            }
        }
    }

    /// Keeps the highest charge id each shard ever gave in `pq_sequence` ('charge', 'charge#1', ...;
    /// see ``chargeSQL``) before the ledger is emptied.
    static let chargeFloorSQL = CachedSQL(
        """
        INSERT INTO pq_sequence (name, value)
        SELECT CASE WHEN id / \(chargesPerShard) = 0 THEN 'charge' ELSE 'charge#' || (id / \(chargesPerShard)) END, MAX(id)
        FROM pq_charge WHERE true GROUP BY id / \(chargesPerShard)
        ON CONFLICT (name) DO UPDATE SET value = CASE WHEN excluded.value > pq_sequence.value THEN excluded.value ELSE pq_sequence.value END
        """)

    static func clear(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, app: String, account: String, now: Date) throws -> Int {
        // Payments still waiting (PURCHASING, or DEFERRED for Ask to Buy) end FAILED with
        // paymentCancelled: a cleared history is not charged later by the authority or an approval.
        let waiting = try db.values(
            String.self, cached: "SELECT id FROM pq_transaction WHERE app = ? AND account = ? AND cleared = 0 AND state IN (?, ?)",
            arguments: [
                app, account, Storebus_PaymentQueue_V1_TransactionState.purchasing.rawValue, Storebus_PaymentQueue_V1_TransactionState.deferred.rawValue
            ])
        // Their observers hear them fail (updatedTransactions) before they leave the queue with the
        // rest, as with any failed payment: the last state they heard was not the end.
        var failedByQueue: [String: [Storebus_PaymentQueue_V1_PaymentTransaction]] = [:]
        for id in waiting {
            guard var record = try TransactionRecord.fetch(db, id: id) else { continue }
            let step = TransactionStateMachine.step(record.state, .clearHistory, record.machineFacts)
            guard case .move = step else { continue }
            record.apply(step, at: Self.milliseconds(now))
            try record.saveDecision(db)
            failedByQueue[record.queueKey, default: []].append(try record.transaction(db))
        }
        let rows = try db.rows(
            cached: "SELECT id, queue_key, finished FROM pq_transaction WHERE app = ? AND account = ? AND cleared = 0 ORDER BY created_ms, id",
            arguments: [app, account])
        var removedByQueue: [String: [Storebus_PaymentQueue_V1_PaymentTransaction]] = [:]
        for row in rows where !(row["finished"] as Bool) {
            var transaction = try Self.transaction(db, id: row["id"])!
            transaction.finished = true
            removedByQueue[row["queue_key"], default: []].append(transaction)
        }
        for (key, delivered) in try Self.clearDeliveries(db, app: app, account: account) {
            removedByQueue[key, default: []] += delivered
        }
        let held = try db.values(
            String.self,
            cached: """
                SELECT DISTINCT product_id FROM pq_transaction WHERE app = ? AND account = ? AND cleared = 0 AND state = ?
                  AND product_type IN (?, ?) AND revoked_ms IS NULL ORDER BY product_id
                """,
            arguments: [
                app, account, Storebus_PaymentQueue_V1_TransactionState.purchased.rawValue,
                Storebus_Catalog_V1_ProductType.nonConsumable.rawValue, Storebus_Catalog_V1_ProductType.autoRenewableSubscription.rawValue
            ])
        let queues = try db.rows(cached: Self.accountQueuesSQL, arguments: [app, account, app, account])
        try db.execute(cached: "UPDATE pq_transaction SET cleared = 1, finished = 1 WHERE app = ? AND account = ?", arguments: [app, account])
        for queueRow in queues {
            let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                $0.appBundleID = app; $0.accountID = account; $0.deviceID = queueRow["device"]
            }
            let key: String = queueRow["queue_key"]
            for chunk in Self.eventSized(failedByQueue[key] ?? []) {
                try Self.announce(&batch, key: key, chunk, queue: queue)
            }
            for chunk in Self.eventSized(removedByQueue[key] ?? []) {
                try Self.announce(&batch, key: key, chunk, removed: true, queue: queue)
            }
            if !held.isEmpty {
                try batch.appendQueueEvent(
                    key: key,
                    Storebus_PaymentQueue_V1_QueueEvent.with {
                        $0.queue = queue
                        $0.revokedEntitlements = .with {
                            $0.productIdentifiers = held; $0.revokedAt = .init(date: now)
                        }
                    })
            }
            try batch.appendQueueEvent(
                key: key,
                Storebus_PaymentQueue_V1_QueueEvent.with {
                    $0.queue = queue
                    $0.historyCleared = .with {
                        $0.appBundleID = app; $0.accountID = account; $0.clearedAt = .init(date: now)
                    }
                })
        }
        return rows.count
    }

    static func charge(_ row: SQLRow) -> Storebus_PaymentQueue_V1_Charge {
        .with {
            $0.chargeID = String(row["id"] as Int64)
            $0.transactionIdentifier = row["transaction_id"]
            $0.productIdentifier = row["product_id"]
            $0.amount = row["amount"]
            $0.currencyCode = row["currency"]
            $0.storefront = row["storefront"]
            $0.chargedAt = Self.timestamp(milliseconds: row["charged_ms"])
            $0.refunded = row["refunded"]
            $0.refundedAmount = row["refunded_amount"]
        }
    }
}
