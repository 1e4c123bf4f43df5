import Foundation
import StoreBus
import StoreBusStorage
import StoreSchema

extension TransactionStore {
    /// A page of the accounts of `app` that have transactions, in account order (their
    /// identifiers' byte order), each with its devices' queues and their counts: at most `limit`
    /// accounts after the one `pageToken` names (empty: from the first). Returns the token of the
    /// next page, empty after the last. An operator's listing (the console's): it reads the app's
    /// rows through the account index, no index of its own that every purchase would write.
    public func accounts(
        app: String, pageToken: String = "", limit: Int = Paging.defaultPageSize
    ) async throws -> (
        accounts: [Storebus_PaymentQueue_V1_AccountSummary], nextPageToken: String
    ) {
        let limit = Paging.clamped(limit)
        let after = try Paging.key(after: pageToken, kind: "accounts") ?? ""
        return try await database.read { db in
            // One more than the page, to know whether there is a next one.
            let names = try db.values(String.self, cached: Self.accountsSQL, arguments: [app, after, limit + 1])
            var accounts: [Storebus_PaymentQueue_V1_AccountSummary] = []
            for name in names.prefix(limit) {
                var account = Storebus_PaymentQueue_V1_AccountSummary()
                account.accountID = name
                var newest: Int64 = 0
                for row in try db.rows(cached: Self.devicesSQL, arguments: [app, name]) {
                    let count: Int64 = row["count"]
                    let unfinished: Int64 = row["unfinished"]
                    let last: Int64 = row["last_ms"]
                    account.devices.append(
                        .with {
                            $0.deviceID = row["device"]
                            $0.transactionCount = UInt32(clamping: count)
                            $0.unfinishedCount = UInt32(clamping: unfinished)
                        })
                    account.transactionCount += UInt32(clamping: count)
                    account.unfinishedCount += UInt32(clamping: unfinished)
                    newest = max(newest, last)
                }
                account.lastTransactionDate = .init(date: Date(timeIntervalSince1970: Double(newest) / 1000))
                accounts.append(account)
            }
            guard names.count > limit, let last = accounts.last else { return (accounts, "") }
            return (accounts, Paging.token("accounts", afterKey: last.accountID))
        }
    }

    static let accountsSQL: CachedSQL = """
        SELECT DISTINCT account FROM pq_transaction INDEXED BY pq_transaction_account
        WHERE app = ? AND account > ? ORDER BY account LIMIT ?
        """
    static let devicesSQL: CachedSQL = """
        SELECT device, COUNT(*) AS count, SUM(CASE WHEN finished = 0 THEN 1 ELSE 0 END) AS unfinished, MAX(date_ms) AS last_ms
        FROM pq_transaction INDEXED BY pq_transaction_account WHERE app = ? AND account = ? GROUP BY device ORDER BY device
        """
}
