import Foundation
import GRDB
import PaymentQueue
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema

/// A backlog of renewals for the paced flows measured beside it
/// (`purchase_flow_paced_*_during_renewals_ms`): `count` subscriptions of as many accounts, their
/// periods all ending now, as purchases long past would have left them. They are written into the
/// payment queue's database while the payment queue is stopped (a fixture, as a restore from a
/// backup would be: no service shares its database with another process), and the payment queue
/// started again renews them from its start, beside the calls it serves.
struct RenewalBacklog {
    let directory: URL
    let app: String
    let count: Int

    /// The payment queue's database in a cluster started by StoreBusTesting.
    init(cluster: StoreCluster, app: String, count: Int) {
        directory = URL(fileURLWithPath: cluster.directory.path("data"))
        self.app = app
        self.count = count
    }

    /// The database as the payment queue opens it (its SQLite settings and WAL handling), while the
    /// payment queue is stopped.
    private func open() throws -> StoreDatabase {
        try StoreDatabase(directory: directory, name: "payment-queue", durability: .full, migrator: PaymentQueueSchema.migrator)
    }

    /// Stops the cluster's payment queue, writes the subscriptions of round `round`, due now, in one
    /// transaction, and starts it again.
    func make(round: Int, in cluster: StoreCluster) async throws {
        let status = await cluster.queue.stop()
        guard status == 0 else { throw ClusterFailure(description: "the payment queue stopped with status \(status)") }
        try await write(round: round)
        try await cluster.startPaymentQueue()
    }

    private func write(round: Int) async throws {
        let database = try open()
        defer { try? database.close() }
        let (app, count) = (app, count)
        try await database.write { db in
            try Self.insertDue(db, app: app, group: "backlog", accountPrefix: "backlog-\(round)", count: count, dueMS: EpochMilliseconds.now - 1)
        }
    }

    /// Writes `count` active subscriptions of group `group`, one per account `<accountPrefix>-<i>`,
    /// whose periods all end at `dueMS`, as purchases long past would have left them: the backlog
    /// here and `renewals_per_s`'s.
    static func insertDue(_ db: any SQLConnection, app: String, group: String, accountPrefix: String, count: Int, dueMS: Int64) throws {
        let insert: CachedSQL = """
            INSERT INTO pq_subscription (app, account, grp, product_id, auto_renew_product_id, auto_renew, original_id, original_ms,
                latest_id, expires_ms, status, device, period, price, currency, storefront)
            VALUES (?, ?, ?, 'bench.monthly', 'bench.monthly', 1, ?, ?, ?, ?, ?, 'device', 'P1M', '4.99', 'USD', 'USA')
            """
        for index in 0..<count {
            let account = "\(accountPrefix)-\(index)"
            try db.execute(
                cached: insert,
                arguments: [
                    app, account, group, account, dueMS - 300_000, account, dueMS, Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue
                ])
        }
    }

    /// About how many of round `round`'s subscriptions have not renewed yet: a sample of fifty of
    /// them, asked of the payment queue (the bench never opens the database of a running service).
    func left(round: Int, client: RPCClient) async throws -> Int {
        var left = 0
        for index in stride(from: 0, to: count, by: max(1, count / 50)) {
            let subscriptions = try await client.call(
                Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
                .with {
                    $0.appBundleID = app
                    $0.accountID = "backlog-\(round)-\(index)"
                })
            if subscriptions.subscriptions.first?.renewalCount == 0 { left += 1 }
        }
        return left * max(1, count / 50)
    }

    /// Waits until every subscription of round `round` renewed (as far as the sample of
    /// ``left(round:client:)`` tells, at most `limit`); the seconds it took from `start`.
    func drained(round: Int, client: RPCClient, since start: ContinuousClock.Instant, limit: Duration = .seconds(600)) async throws -> Double {
        while try await left(round: round, client: client) > 0 {
            guard ContinuousClock.now - start < limit else { throw ClusterFailure(description: "the renewal backlog was not worked through in \(limit)") }
            try await Task.sleep(for: .milliseconds(200))
        }
        let elapsed = (ContinuousClock.now - start).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }
}
