import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

// The charge ledger: one charge per paid transaction, refunds marking it.
extension TransactionStore {
    /// A page of the ledger of an account in an app, oldest first: at most `limit` charges after the
    /// one `pageToken` names (empty: from the first). Returns the token of the next page, empty after
    /// the last.
    public func charges(
        app: String, account: String, pageToken: String = "", limit: Int = Paging.defaultPageSize
    ) async throws -> (charges: [Storebus_PaymentQueue_V1_Charge], nextPageToken: String) {
        let limit = Paging.clamped(limit)
        let after = try Paging.row(after: pageToken, kind: "charges") ?? 0
        return try await database.read { db in
            // Through the account's transactions, as the transactions' listing reads them: charges
            // have no index by account of their own (see the v7 migration).
            let rows = try db.rows(cached: Self.ledgerSQL, arguments: [app, account, after, limit + 1])
            let page = rows.prefix(limit)
            guard page.count < rows.count, let last = page.last else { return (page.map(Self.charge), "") }
            return (page.map(Self.charge), Paging.token("charges", after: last["id"]))
        }
    }

    /// Charges a PURCHASED transaction, unless the account already holds this non-consumable (a
    /// regular purchased transaction, but no second charge). Subscriptions are charged per period:
    /// ``startPeriod(_:_:at:)`` decides whether a purchase of one starts a period.
    static func charge(_ db: any SQLConnection, _ record: TransactionRecord, at ms: Int64) throws {
        if record.productType == .nonConsumable {
            if try holds(db, app: record.app, account: record.account, product: record.productID) { return }
        }
        // Charge ids count on from the last ever given in the shard, across a Reset that emptied the
        // ledger (see `chargeFloorSQL`), so that none is issued twice. COALESCE stops at its first
        // non-NULL argument: the kept floor is read only while the shard has no charge.
        let first = Int64(record.shard) * chargesPerShard
        try db.execute(cached: chargeSQL) {
            $0.int(first)
            $0.int(first + chargesPerShard)
            $0.text(record.shard == 0 ? "charge" : "charge#\(record.shard)")
            $0.text(record.id)
            $0.text(record.app)
            $0.text(record.account)
            $0.text(record.productID)
            $0.text(Self.amount(price: record.price, quantity: record.quantity))
            $0.text(record.currency)
            $0.text(record.storefront)
            $0.int(ms)
        }
    }

    /// Charge ids each shard has of its own: shard s charges from s × this on (shard 0's are those of
    /// a log that is not sharded), so that the instances owning shards never give the same id.
    static let chargesPerShard: Int64 = 1_000_000_000_000

    /// A charge, its id one more than the shard's last (`?1` to `?2` its range; `?3` its floor's row
    /// in `pq_sequence`), read backwards through the primary key: one step.
    static let chargeSQL: CachedSQL = """
        INSERT INTO pq_charge (id, transaction_id, app, account, product_id, amount, currency, storefront, charged_ms)
        VALUES (COALESCE((SELECT id FROM pq_charge WHERE id > ?1 AND id <= ?2 ORDER BY id DESC LIMIT 1),
                         (SELECT value FROM pq_sequence WHERE name = ?3), ?1) + 1,
                ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
        """

    /// Whether the account holds the product: a charge of one of its transactions of that product,
    /// not refunded, and not cleared. Read through the transactions' index by account and product
    /// (charges have none by account; see the v7 migration).
    static func holds(_ db: any SQLConnection, app: String, account: String, product: String) throws -> Bool {
        try db.fetchFirst(
            cached: holdsSQL,
            bind: {
                $0.text(app)
                $0.text(account)
                $0.text(product)
            }
        ) { row in row.bool(0) } ?? false
    }

    /// Whether an account (`?`, `?`) holds a product (`?`): see ``holds(_:app:account:product:)``.
    static let holdsSQL: CachedSQL = """
        SELECT EXISTS (SELECT 1 FROM pq_transaction t INDEXED BY pq_transaction_account JOIN pq_charge c ON c.transaction_id = t.id
                       WHERE t.app = ? AND t.account = ? AND t.product_id = ? AND t.cleared = 0 AND c.refunded = 0)
        """
    /// A page of an account's ledger: the charges of an account (`?`, `?`) after a charge id (`?`), at
    /// most `?`, oldest first, through the account's transactions.
    static let ledgerSQL: CachedSQL = """
        SELECT c.* FROM pq_transaction t INDEXED BY pq_transaction_account JOIN pq_charge c ON c.transaction_id = t.id
        WHERE t.app = ? AND t.account = ? AND c.id > ? ORDER BY c.id LIMIT ?
        """

    /// Price times quantity, as a decimal string.
    static func amount(price: String, quantity: Int) -> String {
        guard quantity > 1, let value = Decimal(string: price, locale: Locale(identifier: "en_US_POSIX")) else { return price }
        return NSDecimalNumber(decimal: value * Decimal(quantity)).stringValue
    }

}
