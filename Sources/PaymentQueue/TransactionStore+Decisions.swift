import Foundation
import StoreBus
import StoreBusStorage
import StoreSchema

/// Deciding PURCHASING transactions: the payment authority's rounds (each owned shard's due
/// transactions, one write a shard), Ask to Buy's answers and interrupted purchases resolved.
extension TransactionStore {
    /// PURCHASING transactions of a shard (`?`) due by a time (`?`), oldest first, at most `?`. The
    /// state is written into the SQL, not bound: only then can SQLite use the partial index of
    /// PURCHASING transactions.
    static let dueSQL: CachedSQL =
        "SELECT id FROM pq_transaction WHERE state = \(Storebus_PaymentQueue_V1_TransactionState.purchasing.rawValue) AND shard = ? AND decide_at_ms <= ? ORDER BY decide_at_ms, id LIMIT ?"
    /// The earliest decision time of a PURCHASING transaction of a shard (`?`).
    static let nextDueSQL: CachedSQL =
        "SELECT MIN(decide_at_ms) FROM pq_transaction WHERE state = \(Storebus_PaymentQueue_V1_TransactionState.purchasing.rawValue) AND shard = ?"

    /// The shards of the log this instance owns, whose due work (decisions, renewals, retries) it
    /// does: every shard on SQLite; on a sharded log, its share.
    var ownedShards: [UInt32] { database.ownedShards(logName: Self.logName) }
    /// How many shards the log has.
    var shardCount: UInt32 { database.shardCount(logName: Self.logName) }

    /// PURCHASING transactions of the shards this instance owns whose decision time has come, oldest
    /// first in each shard.
    public func due(now: Date = Date(), limit: Int = 256) async throws -> [String] {
        let shards = ownedShards
        return try await database.read { db in
            try shards.flatMap { shard in
                try db.values(String.self, cached: Self.dueSQL, arguments: [Int64(shard), Self.milliseconds(now), limit])
            }
        }
    }

    /// The earliest decision time of a PURCHASING transaction of the shards this instance owns, if any.
    public func nextDecision() async throws -> Date? {
        let shards = ownedShards
        return try await database.read { db in
            try shards.compactMap { shard in try db.value(Int64.self, cached: Self.nextDueSQL, arguments: [Int64(shard)]) }.min()
                .map(EpochMilliseconds.date)
        }
    }

    /// Decides the PURCHASING transactions that are due, in each shard this instance owns (at most
    /// `limit` a shard, oldest first) one write a shard, which also finds whether more are due and
    /// when the next one will be: the authority's whole round in one transaction a shard, with no
    /// reads of its own.
    public func decideDue(now: Date = Date(), limit: Int = 256) async throws -> (decided: Int, moreDue: Bool, next: Date?) {
        let nowMS = Self.milliseconds(now)
        var total = (decided: 0, moreDue: false, next: Date?.none)
        for shard in ownedShards {
            let round = try await Self.unlessLost {
                try await self.writer.write { db, batch in
                    try batch.requireOwner(shard: shard)
                    let ids = try db.values(String.self, cached: Self.dueSQL, arguments: [Int64(shard), nowMS, limit])
                    let decided = try ids.compactMap { id in try Self.decide(db, &batch, id: id, now: now) }.count
                    let next = try db.value(Int64.self, cached: Self.nextDueSQL, arguments: [Int64(shard)])
                    return (decided, next.map { $0 <= nowMS } ?? false, next.map(EpochMilliseconds.date))
                }
            }
            guard let round else { continue }
            total.decided += round.0
            total.moreDue = total.moreDue || round.1
            total.next = [total.next, round.2].compactMap { $0 }.min()
        }
        return total
    }

    /// `work` on one shard, or nil when the shard went to another instance meanwhile (NOT_OWNER):
    /// its new owner does that work.
    static func unlessLost<T>(_ work: () async throws -> T) async throws -> T? {
        do {
            return try await work()
        } catch let error as RPCError where error.isNotOwner {
            return nil
        }
    }

    /// Applies the policy copied onto a PURCHASING transaction: PURCHASED (charged unless the account
    /// already holds the product), FAILED, DEFERRED (ask to buy) or FAILED-and-interrupted. Returns the
    /// transaction, or nil when it was no longer PURCHASING (decided already).
    @discardableResult
    public func decide(_ id: String, now: Date = Date()) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction? {
        try await decide([id], now: now).first
    }

    /// Decides several transactions in one database transaction (one commit, one fsync for all: the
    /// authority's group commit). Returns the ones that were still PURCHASING, decided.
    @discardableResult
    public func decide(_ ids: [String], now: Date = Date()) async throws -> [Storebus_PaymentQueue_V1_PaymentTransaction] {
        try await writer.write { db, batch in
            try ids.compactMap { id in try Self.decide(db, &batch, id: id, now: now) }
        }
    }

    /// Decides the transaction `id` by the policy copied onto it (see ``TransactionRecord/decide(at:)``).
    /// Returns it decided, or nil when it was not PURCHASING (decided already).
    static func decide(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, id: String, now: Date) throws -> Storebus_PaymentQueue_V1_PaymentTransaction? {
        guard var record = try TransactionRecord.fetch(db, id: id), record.state == .purchasing else { return nil }
        let nowMS = Self.milliseconds(now)
        record.decide(at: nowMS)
        try record.saveDecision(db)
        return try announceDecision(db, &batch, record, at: nowMS)
    }

    /// After a transaction's decision is written: charges it when PURCHASED (see ``charge(_:_:at:)``)
    /// and announces it to its queue. Returns it.
    @discardableResult
    static func announceDecision(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ record: TransactionRecord, at ms: Int64) throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        var record = record
        if record.state == .purchased, try startPeriod(db, &batch, &record, at: ms) { try charge(db, record, at: ms) }
        let transaction = try record.transaction(db)
        try Self.announce(&batch, key: record.queueKey, [transaction], queue: transaction.queue)
        try announceSubscription(db, &batch, of: record)
        return transaction
    }

    /// Ask to Buy: a DEFERRED transaction approved becomes PURCHASED (and charged); declined, FAILED
    /// with paymentCancelled. Approving an approved one (or declining a declined one) is OK.
    public func answerAskToBuy(_ id: String, approve: Bool, now: Date = Date()) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        try await writer.write { db, batch in
            guard var record = try TransactionRecord.fetch(db, id: id) else {
                throw TransactionStateMachine.unknown(id)
            }
            try batch.requireOwner(shard: record.shard)
            let nowMS = Self.milliseconds(now)
            let step = TransactionStateMachine.step(record.state, approve ? .approve : .decline, record.machineFacts)
            switch step {
            case .refused(let predicate):
                throw TransactionStateMachine.refusal(id, predicate)
            case .move:
                record.apply(step, at: nowMS)
            default:
                // Approved already, or declined already (a clear fails a deferred one too: it is over).
                return try record.transaction(db)
            }
            try record.saveDecision(db)
            return try Self.announceDecision(db, &batch, record, at: nowMS)
        }
    }

    /// An interrupted purchase resolved outside the app: a new PURCHASED transaction for the same
    /// payment in the same queue, charged once. Resolving again returns that same transaction. Like a
    /// payment, it is RESOURCE_EXHAUSTED while the queue holds as many unfinished transactions as it
    /// may (the app has to finish some first).
    public func resolveInterrupted(_ id: String, now: Date = Date()) async throws -> Storebus_PaymentQueue_V1_PaymentTransaction {
        let maxUnfinished = self.maxUnfinished
        return try await writer.write { db, batch in
            guard let interrupted = try TransactionRecord.fetch(db, id: id) else {
                throw TransactionStateMachine.unknown(id)
            }
            try batch.requireOwner(shard: interrupted.shard)
            guard interrupted.interrupted else {
                throw RPCError(.failedPrecondition, "transaction \(id) is not an interrupted purchase")
            }
            if let resolved = interrupted.resolvedBy { return try Self.transaction(db, id: resolved)! }
            // Cleared purchase history is never charged later (see clear).
            guard !interrupted.cleared else {
                throw RPCError(.failedPrecondition, "transaction \(id) was cleared with the account's purchase history and can no longer be resolved")
            }
            let load = try Self.unfinishedLoad(db, queueKey: interrupted.queueKey)
            let nowMS = Self.milliseconds(now)
            var payment = interrupted.payment
            payment.simulatesAskToBuyInSandbox = false
            var record = TransactionRecord(
                id: try Self.nextIdentifier(db, shard: interrupted.shard), shard: interrupted.shard, queue: interrupted.queue, state: .purchased,
                payment: payment, productType: interrupted.productType, storefront: interrupted.storefront, price: interrupted.price,
                currency: interrupted.currency, error: nil, policy: .with { $0.mode = .approve }, decideAtMS: nowMS, nowMS: nowMS,
                downloads: interrupted.downloads
            )
            record.period = interrupted.period
            record.group = interrupted.group
            record.offer = interrupted.offer
            record.level = interrupted.level
            let charged = try Self.startPeriod(db, &batch, &record, at: nowMS)
            let transaction = try Self.announceNew(&record, db, &batch, load: load, maxUnfinished: maxUnfinished, doing: "resolving this purchase")
            try Self.announceSubscription(db, &batch, of: record)
            try record.insert(db)
            if charged { try Self.charge(db, record, at: nowMS) }
            try db.execute(cached: "UPDATE pq_transaction SET resolved_by = ? WHERE id = ?", arguments: [record.id, id])
            return transaction
        }
    }
}
