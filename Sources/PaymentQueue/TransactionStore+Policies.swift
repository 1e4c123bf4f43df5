import GRDB
import StoreBus
import StoreBusStorage
import StoreSchema

// The sandbox's payment policies: per account, else the app's default, else APPROVE.
extension TransactionStore {
    /// The policy in force for an account: its own, else the app's default, else APPROVE.
    public func policy(app: String, account: String) async throws -> (policy: Storebus_PaymentQueue_V1_PaymentPolicy, isDefault: Bool) {
        try await database.read { db in try Self.policy(db, app: app, account: account) }
    }

    static let policySQL: CachedSQL = """
        SELECT account, mode, fail_error, delay_ms, restricted FROM pq_policy WHERE app = ?1 AND account = ?2
        UNION ALL SELECT account, mode, fail_error, delay_ms, restricted FROM pq_policy WHERE app = ?1 AND account = '' LIMIT 1
        """

    /// The policy in force for an account, read in `db`'s transaction.
    static func policy(_ db: any SQLConnection, app: String, account: String) throws -> (policy: Storebus_PaymentQueue_V1_PaymentPolicy, isDefault: Bool) {
        // The account's own policy, else the app's default (account ''): both keys in one statement,
        // the account's row first (UNION ALL keeps that order with no sort; LIMIT 1 stops there).
        let found = try db.fetchFirst(
            cached: policySQL,
            bind: {
                $0.text(app)
                $0.text(account)
            }
        ) { row in
            (
                policy: Storebus_PaymentQueue_V1_PaymentPolicy.with {
                    $0.mode = Storebus_PaymentQueue_V1_PolicyMode(rawValue: row.int(1)) ?? .approve
                    $0.failError = Storebus_PaymentQueue_V1_SKError(rawValue: row.int(2)) ?? .unknown
                    $0.delayMs = UInt32(clamping: row.int64(3))
                    $0.purchasesRestricted = row.bool(4)
                }, isDefault: row.text(0).isEmpty
            )
        }
        return found ?? (.with { $0.mode = .approve }, true)
    }

    /// Sets the policy of an account (or the app's default with an empty account).
    public func setPolicy(_ policy: Storebus_PaymentQueue_V1_PaymentPolicy, app: String, account: String) async throws {
        try await database.write { db in
            try db.execute(
                cached: """
                    INSERT INTO pq_policy (app, account, mode, fail_error, delay_ms, restricted) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (app, account) DO UPDATE SET mode = excluded.mode, fail_error = excluded.fail_error,
                        delay_ms = excluded.delay_ms, restricted = excluded.restricted
                    """, arguments: [app, account, policy.mode.rawValue, policy.failError.rawValue, policy.delayMs, policy.purchasesRestricted])
        }
    }
}
