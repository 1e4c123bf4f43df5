import Foundation
import StoreBus
import StoreBusSDK
import StoreSchema

/// The payment queue's log as the console follows it (PaymentQueueAdmin.ReadActivity): one position
/// per shard, the cursor a live page's stream carries (in its URL, then as each event's id, which
/// the browser sends again when it reconnects), so that nothing committed after the page was read
/// is missed and nothing is shown twice.
enum Activity {
    /// Which queues a page follows: every queue, an app's, or an account's.
    struct Scope: Sendable, Equatable {
        var app: String = ""
        var account: String = ""

        func includes(_ key: String) -> Bool {
            guard !app.isEmpty else { return true }
            let parts = key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == app else { return false }
            return account.isEmpty || parts[1] == account
        }
    }

    /// One position per shard of the log.
    struct Cursor: Sendable, Equatable {
        var positions: [UInt64]

        /// `12.0.7`: shard 0 read through 12, shard 1 through 0, shard 2 through 7.
        var text: String { positions.map(String.init).joined(separator: ".") }

        init(positions: [UInt64]) {
            self.positions = positions
        }

        /// nil for text that is not a cursor (at most 1024 shards).
        init?(_ text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard (1...1024).contains(parts.count) else { return nil }
            var positions: [UInt64] = []
            for part in parts {
                guard part.count <= 20, let value = UInt64(part) else { return nil }
                positions.append(value)
            }
            self.positions = positions
        }
    }

    /// Something a page shows: a transaction's row, or another kind of change.
    enum Item: Sendable {
        case transaction(TransactionRow)
        case other(ActivityView)
    }

    /// The log's newest positions, one per shard (the shard map's heads).
    static func heads(_ admin: StoreConnection) async throws -> Cursor {
        let map = try await admin.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.getShardMap, .init())
        var positions = [UInt64](repeating: 0, count: max(Int(map.shardCount), 1))
        for shard in map.shards where Int(shard.shard) < positions.count { positions[Int(shard.shard)] = shard.headSeq }
        return Cursor(positions: positions)
    }

    /// The stream's address for a page read at `cursor`.
    static func streamURL(cursor: Cursor, scope: Scope) -> String {
        var url = "/events?cursor=\(cursor.text)"
        if !scope.app.isEmpty { url += "&app=\(ConsoleNames.segment(scope.app))" }
        if !scope.account.isEmpty { url += "&account=\(ConsoleNames.segment(scope.account))" }
        return url
    }

    /// The transactions and other activity in the last `depth` positions of each shard before
    /// `heads`, newest first; each transaction once, in its latest state.
    static func recent(
        _ admin: StoreConnection, heads: Cursor, depth: UInt64, scope: Scope
    ) async throws -> (
        transactions: [TransactionRow], activity: [ActivityView]
    ) {
        var rows: [String: TransactionRow] = [:]
        var activity: [(Int64, ActivityView)] = []
        for (shard, head) in heads.positions.enumerated() {
            var position = head > depth ? head - depth : 0
            while position < head {
                let page = try await read(admin, shard: UInt32(shard), after: position, limit: 500)
                for record in page.events where record.seq <= head {
                    for item in items(record, scope: scope) {
                        switch item {
                        case .transaction(let row): rows[row.id] = row
                        case .other(let view): activity.append((record.time.seconds * 1000 + Int64(record.time.nanos / 1_000_000), view))
                        }
                    }
                }
                guard page.throughSeq > position else { break }
                position = page.throughSeq
            }
        }
        let transactions = rows.values.sorted { ($0.sortKey, $0.id) > ($1.sortKey, $1.id) }
        return (transactions, activity.sorted { $0.0 > $1.0 }.map(\.1))
    }

    static func read(_ admin: StoreConnection, shard: UInt32, after: UInt64, limit: UInt32) async throws -> Storebus_PaymentQueue_V1_QueueEventPage {
        try await admin.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.readActivity,
            .with {
                $0.shard = shard
                $0.afterSeq = after
                $0.limit = limit
            })
    }

    /// What one event of the log shows, within `scope`.
    static func items(_ record: Storebus_PaymentQueue_V1_QueueEventRecord, scope: Scope) -> [Item] {
        guard scope.includes(record.key) else { return [] }
        let parts = record.key.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        let app = parts.first ?? ""
        let account = parts.count > 1 ? parts[1] : ""
        let date = ConsoleNames.date(record.time)
        let other = { (text: String) in [Item.other(ActivityView(date: date, app: app, account: account, url: ConsoleNames.accountURL(app, account), text: text))] }
        switch record.payload.event {
        case .updatedTransactions(let updated)?:
            return updated.transactions.map { .transaction(TransactionRow($0)) }
        case .removedTransactions(let removed)?:
            return removed.transactions.map { .transaction(TransactionRow($0, finished: true)) }
        case .refundedTransactions(let refunded)?:
            return refunded.transactions.map { .transaction(TransactionRow($0)) }
                + other("refunded \(refunded.transactions.map { "\($0.transactionIdentifier) (\($0.payment.productIdentifier))" }.joined(separator: ", "))")
        case .restoreCompletedTransactionsFinished(let finished)?:
            return other("a restore delivered \(finished.restoredCount) transaction\(finished.restoredCount == 1 ? "" : "s")")
        case .restoreCompletedTransactionsFailed(let failed)?:
            return other("a restore failed: \(failed.error.localizedDescription)")
        case .revokedEntitlements(let revoked)?:
            return other("entitlements revoked: \(revoked.productIdentifiers.joined(separator: ", "))")
        case .historyCleared?:
            return other("purchase history cleared")
        case .updatedDownloads(let downloads)?:
            return other(
                downloads.downloads.map {
                    "download of \($0.contentIdentifier) (transaction \($0.transactionIdentifier)) \(ConsoleNames.download($0.state)), \(ConsoleNames.percent($0.progress))%"
                }.joined(separator: "; "))
        case .subscriptionChanged(let changed)?:
            let subscription = changed.subscription
            return other(
                "subscription \(subscription.subscriptionGroupIdentifier) (\(subscription.productIdentifier)): \(ConsoleNames.subscription(subscription.status)), auto-renew \(subscription.autoRenewStatus ? "on" : "off"), expires \(ConsoleNames.date(subscription.expiresDate))"
            )
        case nil:
            return []
        }
    }
}
