import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

// Renewals reach every device of the account (docs/subscriptions.md): a renewal is one transaction,
// kept in the queue of the subscription's latest purchase, and delivered by the same identifier to
// each other queue the account has in the app. Each queue finishes its delivery on its own; until it
// does, the delivery is in its launch replay and counts against its limits, as its own transactions
// do. The rows live in `pq_delivery`.
extension TransactionStore {
    /// Delivers `transaction` (just written to the queue `owner`) to every other queue of its account
    /// in its app: a delivery row each and an `updatedTransactions` event in each queue's log, the
    /// transaction naming that queue. A queue without room for another unfinished transaction is
    /// passed over (its device still finds the renewal in receipts and entitlements); returns the
    /// keys of the queues delivered to.
    @discardableResult
    static func deliver(
        _ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ transaction: Storebus_PaymentQueue_V1_PaymentTransaction,
        weight: Int, owner: String, at ms: Int64, maxUnfinished: Int
    ) throws -> [String] {
        let app = transaction.queue.appBundleID, account = transaction.queue.accountID
        var delivered: [String] = []
        for row in try db.rows(cached: accountQueuesSQL, arguments: [app, account, app, account]) {
            let key: String = row["queue_key"]
            guard key != owner else { continue }
            let own = try unfinishedLoad(db, queueKey: key)
            guard own.count < maxUnfinished, own.bytes + weight <= maxUnfinishedReplayBytes else { continue }
            let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                $0.appBundleID = app
                $0.accountID = account
                $0.deviceID = row["device"]
            }
            try db.execute(
                cached: """
                    INSERT INTO pq_delivery (queue_key, id, app, account, device, finished, replay_bytes, created_ms)
                    VALUES (?, ?, ?, ?, ?, 0, ?, ?) ON CONFLICT DO NOTHING
                    """, arguments: [key, transaction.transactionIdentifier, app, account, queue.deviceID, weight, ms])
            var copy = transaction
            copy.queue = queue
            try announce(&batch, key: key, [copy], queue: queue)
            delivered.append(key)
        }
        return delivered
    }

    /// Finishes the delivery of `id` to `queue`, if there is one: nil when there is none (the caller
    /// goes on with its own rules), true when it was finished already, false when this finished it.
    /// A delivery is finished by the rules of the transaction's state, as the queue's own are.
    static func finishDelivery(_ db: any SQLConnection, _ batch: inout EventLogWriter.Batch, _ id: String, queue: Storebus_PaymentQueue_V1_QueueRef) throws -> Bool? {
        guard
            let finished = try db.value(Bool.self, cached: "SELECT finished FROM pq_delivery WHERE queue_key = ? AND id = ?", arguments: [queue.key, id]),
            let record = try TransactionRecord.fetch(db, id: id)
        else { return nil }
        if finished { return true }
        if case .refused(let predicate) = TransactionStateMachine.step(record.state, .finish, record.machineFacts) {
            throw TransactionStateMachine.refusal(id, predicate)
        }
        try db.execute(cached: "UPDATE pq_delivery SET finished = 1 WHERE queue_key = ? AND id = ?", arguments: [queue.key, id])
        var removed = try record.transaction(db)
        removed.queue = queue
        removed.finished = true
        try announce(&batch, key: queue.key, [removed], removed: true, queue: queue)
        return false
    }

    /// The unfinished deliveries to `queue`, with their creation times, each naming that queue.
    static func unfinishedDeliveries(_ db: any SQLConnection, queue: Storebus_PaymentQueue_V1_QueueRef) throws -> [(ms: Int64, transaction: Storebus_PaymentQueue_V1_PaymentTransaction)] {
        let rows = try db.rows(cached: "SELECT id, created_ms FROM pq_delivery WHERE queue_key = ? AND finished = 0 ORDER BY created_ms, id", arguments: [queue.key])
        return try rows.compactMap { row in
            guard var transaction = try transaction(db, id: row["id"]) else { return nil }
            transaction.queue = queue
            return (row["created_ms"], transaction)
        }
    }

    /// The account's unfinished deliveries, by queue, each naming its queue and marked finished (for
    /// clearing the account's history: they leave their queues with it); marks them finished.
    static func clearDeliveries(_ db: any SQLConnection, app: String, account: String) throws -> [String: [Storebus_PaymentQueue_V1_PaymentTransaction]] {
        let rows = try db.rows(
            cached: """
                SELECT queue_key, id, device FROM pq_delivery WHERE app = ? AND account = ? AND finished = 0 ORDER BY created_ms, id
                """, arguments: [app, account])
        var byQueue: [String: [Storebus_PaymentQueue_V1_PaymentTransaction]] = [:]
        for row in rows {
            guard var transaction = try transaction(db, id: row["id"]) else { continue }
            transaction.queue = .with {
                $0.appBundleID = app
                $0.accountID = account
                $0.deviceID = row["device"]
            }
            transaction.finished = true
            byQueue[row["queue_key"], default: []].append(transaction)
        }
        try db.execute(cached: "UPDATE pq_delivery SET finished = 1 WHERE app = ? AND account = ? AND finished = 0", arguments: [app, account])
        return byQueue
    }
}
