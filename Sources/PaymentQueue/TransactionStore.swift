import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf
import Synchronization

/// The payment queue's durable state: transactions, idempotency keys, the charge ledger and sandbox
/// policies. Every change is one database transaction with the `QueueEvent`s that describe it
/// (see docs/payment-queue.md).
public final class TransactionStore: Sendable {
    /// The event log's name.
    public static let logName = ServiceRegistry.paymentQueueLog
    /// First transaction identifier; identifiers are this plus a counter, as numeric strings.
    public static let identifierBase: Int64 = 1_000_000_000_000_000

    /// Most unfinished transactions one queue may hold (default of ``maxUnfinished``).
    ///
    /// A device's launch replay is one answer holding every unfinished transaction of its queue, and
    /// an answer must stay under the 4 MiB message limit. A queue this full means an app that does not
    /// finish its transactions; it has to finish some before it can add more.
    public static let defaultMaxUnfinished = 1000
    /// Most bytes that one queue's unfinished transactions may take, together, in its launch replay
    /// (their JSON, see ``replayWeight(_:)``): the replay is one answer, and it stays under the 4 MiB
    /// message limit whatever the fields hold. Counting the JSON rather than the fields' bytes matters:
    /// a control character takes six bytes in JSON, and every transaction repeats its queue's names
    /// and, when restored, its original's payment.
    public static let maxUnfinishedReplayBytes = 3 * 1024 * 1024
    /// Bytes a transaction's weight allows beyond its JSON when it is created, for what it may still
    /// gain while unfinished: an error and its description, a cancellation date, a longer state name.
    static let replayGrowthBytes = 512

    /// What `transaction` weighs against ``maxUnfinishedReplayBytes``: its JSON and room to grow.
    static func replayWeight(_ transaction: Storebus_PaymentQueue_V1_PaymentTransaction) throws -> Int {
        try transaction.jsonUTF8Data().count + replayGrowthBytes
    }

    /// The weight of `record`, a new transaction announced alone by `event` (see ``replayWeight(_:)``):
    /// the event holds the transaction, so its JSON is at least as long as the transaction's (and
    /// spares encoding it once more). A transaction not yet PURCHASED offers its product's downloads
    /// only once it is, and they are counted from the start.
    static func replayWeight(announcedBy event: StoredEvent, _ record: TransactionRecord) throws -> Int {
        let offers = record.state == .purchased || record.state == .restored
        let downloads = offers ? [] : try record.offeredDownloads()
        let later = downloads.isEmpty ? 0 : try Storebus_PaymentQueue_V1_Download.jsonString(from: downloads).utf8.count
        return event.json.utf8.count + later + replayGrowthBytes
    }

    /// Records an unfinished transaction's weight (see ``replayWeight(_:)``).
    static func setReplayWeight(_ db: any SQLConnection, id: String, _ weight: Int) throws {
        try db.execute(cached: "UPDATE pq_transaction SET replay_bytes = ? WHERE id = ?", arguments: [weight, id])
    }
    /// Most transactions announced in one event by a restore or a clear.
    static let transactionsPerEvent = 64

    /// `transactions` in runs of at most ``transactionsPerEvent``, one event each: whatever their
    /// number, an event stays far below the message limit.
    static func eventSized(_ transactions: [Storebus_PaymentQueue_V1_PaymentTransaction]) -> [[Storebus_PaymentQueue_V1_PaymentTransaction]] {
        stride(from: 0, to: transactions.count, by: transactionsPerEvent).map {
            Array(transactions[$0..<min($0 + transactionsPerEvent, transactions.count)])
        }
    }

    let writer: EventLogWriter
    /// The queues ``noteQueue(_:)`` has recorded in this process's life.
    let knownQueues = Mutex<Set<String>>([])
    /// Most unfinished transactions one queue may hold: AddPayment and restore beyond it are
    /// RESOURCE_EXHAUSTED.
    public let maxUnfinished: Int
    /// Reads go through the database (not its pool) so that, when a sync thread makes commits
    /// durable, none is answered from before it is (see ``StoreDatabase/read(_:)``).
    var database: any SQLDatabase { writer.database }
    /// The shard of a queue key (0 when the log is not sharded).
    var shardOf: @Sendable (String) -> UInt32 { writer.shardOf }

    /// A store writing through `writer` (whose database was migrated with ``PaymentQueueSchema``).
    public init(writer: EventLogWriter, maxUnfinished: Int = TransactionStore.defaultMaxUnfinished) {
        self.writer = writer
        self.maxUnfinished = maxUnfinished
    }

    /// The load of a queue's unfinished transactions (see ``unfinishedLoad(_:queueKey:)``).
    /// Its own transactions and the renewals delivered to it (``deliver(_:_:_:weight:owner:at:maxUnfinished:)``).
    static let unfinishedLoadSQL: CachedSQL = """
        SELECT own.n + delivered.n, own.bytes + delivered.bytes
        FROM (SELECT COUNT(*) AS n, COALESCE(SUM(replay_bytes), 0) AS bytes FROM pq_transaction WHERE queue_key = ?1 AND finished = 0) AS own,
             (SELECT COUNT(*) AS n, COALESCE(SUM(replay_bytes), 0) AS bytes FROM pq_delivery WHERE queue_key = ?1 AND finished = 0) AS delivered
        """

    /// The unfinished transactions in the queue with key `queueKey`: how many, and how many bytes of
    /// requestData and applicationUsername they hold, as the launch replay carries them (see
    /// ``restoredPayloadCopies``).
    static func unfinishedLoad(_ db: any SQLConnection, queueKey: String) throws -> (count: Int, bytes: Int) {
        try db.fetchFirst(cached: unfinishedLoadSQL, bind: { $0.text(queueKey) }) { row in (row.int(0), row.int(1)) } ?? (0, 0)
    }

    /// RESOURCE_EXHAUSTED unless a queue holding `load` (its own new transactions not counted yet) can
    /// take `adding` more unfinished transactions weighing `bytes` together.
    static func checkRoom(_ load: (count: Int, bytes: Int), adding: Int, bytes: Int, maxUnfinished: Int, doing: String) throws {
        guard load.count + adding <= maxUnfinished, load.bytes + bytes <= maxUnfinishedReplayBytes else {
            throw RPCError(
                .resourceExhausted,
                "the queue already holds \(load.count) unfinished transactions taking \(load.bytes) bytes in its launch replay; \(doing) would pass its limits (\(maxUnfinished) transactions, \(maxUnfinishedReplayBytes) bytes): finish some first"
            )
        }
    }

    /// What AddPayment decided to create.
    public struct NewTransaction: Sendable {
        public var queue: Storebus_PaymentQueue_V1_QueueRef
        public var payment: Storebus_PaymentQueue_V1_Payment
        public var productType: Storebus_Catalog_V1_ProductType
        public var storefront: String
        public var price: String
        public var currency: String
        /// PURCHASING with the policy to apply at `decideAt`, or FAILED at once with an error.
        public var start: Start
        /// The idempotency key and a digest of the request that carried it.
        public var idempotency: (key: String, digest: String)?
        /// The product's hosted content, offered as downloads once purchased or restored.
        public var downloads: [Storebus_PaymentQueue_V1_Download] = []
        /// Subscriptions: the product's period (ISO 8601, "P1M") and, auto-renewable ones, its group.
        public var subscription: (period: String, group: String)?
        /// Auto-renewable subscriptions: the product's introductory offer in the storefront, if any
        /// (applied when the account never subscribed in the group).
        public var introductoryOffer: Storebus_Catalog_V1_IntroductoryPrice?
        /// Auto-renewable subscriptions: the product's level in its group (1 the highest, 0 none).
        public var subscriptionLevel = 0

        public enum Start: Sendable {
            case purchasing(policy: Storebus_PaymentQueue_V1_PaymentPolicy, decideAt: Date)
            case failed(Storebus_PaymentQueue_V1_StoreKitError)
            /// PURCHASING under the account's policy as it is when the transaction is written (read in
            /// the same database transaction); FAILED with paymentNotAllowed under purchase
            /// restrictions, or with unauthorizedRequestData when the payment carries request data.
            case byPolicy(requestDataPresent: Bool)
        }

        public init(
            queue: Storebus_PaymentQueue_V1_QueueRef, payment: Storebus_PaymentQueue_V1_Payment,
            productType: Storebus_Catalog_V1_ProductType, storefront: String, price: String, currency: String,
            start: Start, idempotency: (key: String, digest: String)?
        ) {
            self.queue = queue
            self.payment = payment
            self.productType = productType
            self.storefront = storefront
            self.price = price
            self.currency = currency
            self.start = start
            self.idempotency = idempotency
        }
    }

    // MARK: Creating

    /// The transaction an idempotency key created, if any. Throws FAILED_PRECONDITION when the key
    /// was used for a different request.
    public func transaction(forKey key: String, app: String, account: String, digest: String) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction? {
        try await database.read { db in try Self.keyed(db, key: key, app: app, account: account, digest: digest) }
    }

    static let keyedSQL: CachedSQL = "SELECT transaction_id, request_digest FROM pq_idempotency WHERE app = ? AND account = ? AND key = ?"

    static func keyed(_ db: any SQLConnection, key: String, app: String, account: String, digest: String) throws -> Storebus_PaymentQueue_V1_PaymentTransaction? {
        let found = try db.fetchFirst(
            cached: keyedSQL,
            bind: {
                $0.text(app)
                $0.text(account)
                $0.text(key)
            }
        ) { row in (id: row.text(0), digest: row.text(1)) }
        guard let found else { return nil }
        guard found.digest == digest else {
            throw RPCError(.failedPrecondition, "idempotency key \"\(key)\" was already used for a different payment")
                .withReason("IDEMPOTENCY_KEY_REUSED", domain: "storebus.payment_queue")
        }
        return try transaction(db, id: found.id)
    }

    static let insertKeySQL: CachedSQL = "INSERT INTO pq_idempotency (app, account, key, transaction_id, request_digest) VALUES (?, ?, ?, ?, ?)"

    /// Creates a transaction with its `updatedTransactions` event. With an idempotency key already
    /// used for the same request (a retry), returns that transaction instead; the check runs in the
    /// write, so a retry racing the first call finds it too.
    ///
    /// With `decideWhenDue`, a PURCHASING transaction whose decision time has already come (a policy
    /// without delay) is also decided in the same database transaction, with its own event after the
    /// first: observers still hear PURCHASING, then the decision, and one commit does for both. The
    /// transaction returned is the PURCHASING one either way; `decided` says whether the authority
    /// still has work.
    public func create(
        _ new: NewTransaction, now: Date = Date(), decideWhenDue: Bool = false
    ) async throws -> (
        transaction: Storebus_PaymentQueue_V1_PaymentTransaction, decided: Bool
    ) {
        let maxUnfinished = self.maxUnfinished
        return try await writer.write { db, batch in
            try batch.requireOwner(key: new.queue.key)
            if let idempotency = new.idempotency,
                let existing = try Self.keyed(db, key: idempotency.key, app: new.queue.appBundleID, account: new.queue.accountID, digest: idempotency.digest)
            {
                return (existing, true)
            }
            // Counted before this payment's row exists; its room is checked once its event is written
            // (the savepoint undoes both when there is none).
            let load = try Self.unfinishedLoad(db, queueKey: new.queue.key)
            let shard = batch.shard(ofKey: new.queue.key)
            let id = try Self.nextIdentifier(db, shard: shard)
            let nowMS = Self.milliseconds(now)
            var state = Storebus_PaymentQueue_V1_TransactionState.purchasing
            var policy = Storebus_PaymentQueue_V1_PaymentPolicy()
            var decideAt = nowMS
            var error: Storebus_PaymentQueue_V1_StoreKitError?
            switch new.start {
            case .purchasing(let startPolicy, let at):
                policy = startPolicy
                decideAt = Self.milliseconds(at)
            case .failed(let failure):
                state = .failed
                error = failure
            case .byPolicy(let requestDataPresent):
                let (current, _) = try Self.policy(db, app: new.queue.appBundleID, account: new.queue.accountID)
                if current.purchasesRestricted {
                    state = .failed
                    error = .make(.paymentNotAllowed)
                } else if requestDataPresent {
                    state = .failed
                    error = .make(.unauthorizedRequestData)
                } else {
                    policy = current
                    decideAt = nowMS + Int64(current.delayMs)
                }
            }
            var record = TransactionRecord(
                id: id, shard: shard, queue: new.queue, state: state, payment: new.payment, productType: new.productType,
                storefront: new.storefront, price: new.price, currency: new.currency, error: error, policy: policy,
                decideAtMS: decideAt, nowMS: nowMS, downloads: try Storebus_PaymentQueue_V1_Download.jsonString(from: new.downloads)
            )
            if let subscription = new.subscription {
                record.period = subscription.period
                record.group = subscription.group
            }
            if let offer = new.introductoryOffer { record.offer = try offer.jsonString() }
            record.level = new.subscriptionLevel
            // The row is written once, after its event: with its weight and, when it is decided at
            // once, its decision.
            let transaction = try Self.announceNew(&record, db, &batch, load: load, maxUnfinished: maxUnfinished, doing: "this payment")
            let decidesNow = state == .purchasing && decideWhenDue && decideAt <= nowMS
            if decidesNow { record.decide(at: nowMS) }
            try record.insert(db)
            if let idempotency = new.idempotency {
                try db.execute(cached: Self.insertKeySQL) {
                    $0.text(new.queue.appBundleID)
                    $0.text(new.queue.accountID)
                    $0.text(idempotency.key)
                    $0.text(id)
                    $0.text(idempotency.digest)
                }
            }
            guard decidesNow else { return (transaction, state != .purchasing) }
            try Self.announceDecision(db, &batch, record, at: nowMS)
            return (transaction, true)
        }
    }

    /// Announces `record`, a new unfinished transaction not written yet, to its queue and sets its
    /// replay weight from that event (see ``replayWeight(announcedBy:_:)``). RESOURCE_EXHAUSTED, for
    /// `doing`, when its queue, holding `load`, has no room for it. Returns the transaction announced.
    static func announceNew(
        _ record: inout TransactionRecord, _ db: any SQLConnection, _ batch: inout EventLogWriter.Batch,
        load: (count: Int, bytes: Int), maxUnfinished: Int, doing: String
    ) throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        let transaction = try record.transaction(db)
        let event = try Self.announce(&batch, key: record.queueKey, [transaction], queue: transaction.queue)
        record.replayBytes = try Self.replayWeight(announcedBy: event, record)
        try Self.checkRoom(load, adding: 1, bytes: record.replayBytes, maxUnfinished: maxUnfinished, doing: doing)
        return transaction
    }

    // MARK: Finishing and reading

    /// A page of the transactions of an account in an app, across its devices, oldest first: at
    /// most `limit` of them, stopping before ``Paging/maxPageBytes`` of their JSON beyond the first,
    /// after the one `pageToken` names (empty: from the first). Returns the token of the next page,
    /// empty after the last.
    ///
    /// Identifiers are fixed-width decimal strings taken in commit order, so the token is the last
    /// identifier given and a transaction committed meanwhile is never skipped. Each page reads the
    /// account's rows through its index and sorts them (an admin listing; no index of its own, which
    /// every purchase would have to write).
    public func accountTransactions(
        app: String, account: String, includeFinished: Bool, pageToken: String = "", limit: Int = Paging.defaultPageSize
    ) async throws -> (transactions: [Storebus_PaymentQueue_V1_PaymentTransaction], nextPageToken: String) {
        let limit = Paging.clamped(limit)
        // Identifiers are compared as the strings they are (fixed-width, so in numeric order).
        let after = try Paging.row(after: pageToken, kind: "transactions").map(String.init) ?? ""
        return try await database.read { db in
            // One more than the page, to know whether there is a next one.
            let ids = try db.values(
                String.self,
                cached: """
                    SELECT id FROM pq_transaction INDEXED BY pq_transaction_account
                    WHERE app = ? AND account = ? AND (? = 1 OR finished = 0) AND id > ? ORDER BY id LIMIT ?
                    """, arguments: [app, account, includeFinished, after, limit + 1])
            var transactions: [Storebus_PaymentQueue_V1_PaymentTransaction] = []
            var bytes = 0
            for id in ids.prefix(limit) {
                let transaction = try Self.transaction(db, id: id)!
                // Measured as the answer carries it: a restored transaction carries its original, and
                // strings can grow sixfold as JSON escapes. The first always goes in, so that a page
                // is never empty while transactions remain.
                bytes += try transaction.jsonUTF8Data().count + 1
                if !transactions.isEmpty && bytes > Paging.maxPageBytes { break }
                transactions.append(transaction)
            }
            guard transactions.count < ids.count, let last = transactions.last else { return (transactions, "") }
            guard let lastID = Int64(last.transactionIdentifier) else {
                throw RPCError(.internalError, "transaction identifier \(last.transactionIdentifier) is not a number")
            }
            return (transactions, Paging.token("transactions", after: lastID))
        }
    }

    static let finishSQL: CachedSQL = "UPDATE pq_transaction SET finished = 1 WHERE id = ?"

    /// finishTransaction: PURCHASED, FAILED and RESTORED transactions leave the queue with a
    /// `removedTransactions` event; PURCHASING and DEFERRED ones cannot be finished; finishing twice is
    /// OK (returns true for "already finished"). A transaction of another account is PERMISSION_DENIED;
    /// one of another device of the same account is not in this queue (NOT_FOUND).
    public func finish(_ id: String, queue: Storebus_PaymentQueue_V1_QueueRef) async throws -> Bool {
        try await writer.write { db, batch in
            try batch.requireOwner(key: queue.key)
            if let already = try Self.finishDelivery(db, &batch, id, queue: queue) { return already }
            var record = try Self.queueRecord(db, id: id, queue: queue)
            switch TransactionStateMachine.step(record.state, .finish, record.machineFacts) {
            case .refused(let predicate): throw TransactionStateMachine.refusal(id, predicate)
            case .leaveQueue: break
            default: return true // finished already
            }
            // Downloads not done are cancelled first, and said so before the transaction leaves.
            try Self.cancelUnfinishedDownloads(db, &batch, &record, queue: queue)
            try db.execute(cached: Self.finishSQL) { $0.text(id) }
            var removed = try record.transaction(db)
            removed.finished = true
            try Self.announce(&batch, key: queue.key, [removed], removed: true, queue: queue)
            return false
        }
    }

    /// A transaction by identifier.
    public func transaction(_ id: String) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction? {
        try await database.read { db in try Self.transaction(db, id: id) }
    }

    /// The queue's unfinished transactions, oldest first, and the queue's position in the event log
    /// that this snapshot reflects.
    public func unfinished(_ queue: Storebus_PaymentQueue_V1_QueueRef) async throws -> (transactions: [Storebus_PaymentQueue_V1_PaymentTransaction], keySeq: UInt64) {
        try await database.read { db in
            let own = try db.rows(
                cached: "SELECT id, created_ms FROM pq_transaction WHERE queue_key = ? AND finished = 0 ORDER BY created_ms, id", arguments: [queue.key]
            ).map { row in (ms: row["created_ms"] as Int64, transaction: try Self.transaction(db, id: row["id"])!) }
            let delivered = try Self.unfinishedDeliveries(db, queue: queue)
            let transactions = delivered.isEmpty ? own.map(\.transaction) : (own + delivered).sorted { $0.ms < $1.ms }.map(\.transaction)
            return (transactions, try EventLog.head(db, key: queue.key))
        }
    }

    /// How many numbers each shard has of its own (see ``nextNumber(_:sequence:shard:)``).
    static let numbersPerShard: Int64 = 10_000_000_000_000

    static let lastNumberSQL: CachedSQL = "SELECT value FROM pq_sequence WHERE name = ?"
    static let firstNumberSQL: CachedSQL = "INSERT INTO pq_sequence (name, value) VALUES (?, ?)"
    static let nextNumberSQL: CachedSQL = "UPDATE pq_sequence SET value = ? WHERE name = ?"

    /// The next number of `sequence` in `shard`: one more than the last it gave, which `pq_sequence`
    /// keeps across restarts and resets. Each shard counts on its own, in a row of its own, from
    /// `shard` × ``numbersPerShard`` on, so that numbers stay unique across a sharded log's shards
    /// with no counter they all share (the instances owning them never wait on each other); shard 0's
    /// numbers, in the sequence's own row, are those of a log that is not sharded.
    static func nextNumber(_ db: any SQLConnection, sequence: String, shard: UInt32) throws -> Int64 {
        // A read and a plain write (the writer's transaction keeps them together): one upsert with
        // RETURNING, which SQLite runs as an insert that fails, an update, and its rows gathered in
        // a temporary table first, took about 26K instructions, 3% of a purchase's in this process.
        let name = shard == 0 ? sequence : "\(sequence)#\(shard)"
        let last = try db.fetchFirst(cached: lastNumberSQL, bind: { $0.text(name) }) { row in row.int64(0) }
        let value = (last ?? 0) + 1
        if last == nil {
            try db.execute(cached: firstNumberSQL) {
                $0.text(name)
                $0.int(value)
            }
        } else {
            try db.execute(cached: nextNumberSQL) {
                $0.int(value)
                $0.text(name)
            }
        }
        return Int64(shard) * numbersPerShard + value
    }

    /// The next identifier of a transaction (or number of a restore) in `shard`.
    static func nextIdentifier(_ db: any SQLConnection, shard: UInt32) throws -> String {
        String(identifierBase + (try nextNumber(db, sequence: "transaction", shard: shard)))
    }

    static func milliseconds(_ date: Date) -> Int64 {
        EpochMilliseconds.of(date)
    }

    static func transaction(_ db: any SQLConnection, id: String) throws -> Storebus_PaymentQueue_V1_PaymentTransaction? {
        try TransactionRecord.fetch(db, id: id)?.transaction(db)
    }

    /// A stored time in milliseconds as a Timestamp, exactly: through a Double, 34.090 s came out as
    /// 34.089999914 s.
    static func timestamp(milliseconds: Int64) -> Google_Protobuf_Timestamp {
        let (seconds, remainder) = milliseconds.quotientAndRemainder(dividingBy: 1000)
        // Floor division, so that a time before 1970 keeps its nanos in 0..<1e9 as the type requires.
        return remainder >= 0
            ? Google_Protobuf_Timestamp(seconds: seconds, nanos: Int32(remainder) * 1_000_000)
            : Google_Protobuf_Timestamp(seconds: seconds - 1, nanos: Int32(remainder + 1000) * 1_000_000)
    }

    /// Announces `transactions` to `queue` (its key `key`) as updated, or as `removed`: one QueueEvent,
    /// written as JSON directly (see ``TransactionJSON``).
    @discardableResult
    static func announce(
        _ batch: inout EventLogWriter.Batch, key: String, _ transactions: [Storebus_PaymentQueue_V1_PaymentTransaction],
        removed: Bool = false, queue: Storebus_PaymentQueue_V1_QueueRef
    ) throws -> StoredEvent {
        try batch.appendJSON(
            key: key, type: Storebus_PaymentQueue_V1_QueueEvent.protoMessageName, topics: QueueTopics.of(transactions, removed: removed)
        ) { out in
            try TransactionJSON.appendQueueEvent(transactions, removed: removed, queue: queue, to: &out)
        }
    }
}
