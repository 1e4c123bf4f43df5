import Foundation
import GRDB
import StoreBusTesting
import StoreSchema

/// A backlog of renewals for the paced flows measured beside it
/// (`purchase_flow_paced_*_during_renewals_ms`): `count` subscriptions of as many accounts, their
/// periods all ending now, as purchases long past would have left them. They are written into the
/// payment queue's database while the payment queue is stopped (a fixture, as a restore from a
/// backup would be: no service shares its database with another process), and the payment queue
/// started again renews them from its start, beside the calls it serves.
struct RenewalBacklog {
    let databasePath: String
    let app: String
    let count: Int

    /// The payment queue's database in a cluster started by StoreBusTesting.
    init(cluster: StoreCluster, app: String, count: Int) {
        databasePath = cluster.directory.path("data") + "/payment-queue.sqlite"
        self.app = app
        self.count = count
    }

    private func open() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.busyMode = .timeout(30)
        return try DatabaseQueue(path: databasePath, configuration: configuration)
    }

    /// Stops the cluster's payment queue, writes the subscriptions of round `round`, due now, in one
    /// transaction, and starts it again.
    func make(round: Int, in cluster: StoreCluster) async throws {
        _ = await cluster.queue.stop()
        try write(round: round)
        try await cluster.startPaymentQueue()
    }

    private func write(round: Int) throws {
        let database = try open()
        defer { try? database.close() }
        let dueMS = Int64(Date().timeIntervalSince1970 * 1000) - 1
        try database.write { db in
            let insert = try db.makeStatement(
                sql: """
                    INSERT INTO pq_subscription (app, account, grp, product_id, auto_renew_product_id, auto_renew, original_id, original_ms,
                        latest_id, expires_ms, status, device, period, price, currency, storefront)
                    VALUES (?, ?, 'backlog', 'bench.monthly', 'bench.monthly', 1, ?, ?, ?, ?, ?, 'device', 'P1M', '4.99', 'USD', 'USA')
                    """)
            for index in 0..<count {
                let original = "backlog-\(round)-\(index)"
                try insert.execute(arguments: [
                    app, "backlog-\(round)-\(index)", original, dueMS - 300_000, original, dueMS,
                    Storebus_PaymentQueue_V1_SubscriptionStatus.active.rawValue
                ])
            }
        }
    }

    /// How many of round `round`'s subscriptions have not renewed yet.
    func left(round: Int) throws -> Int {
        let database = try open()
        defer { try? database.close() }
        return try database.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pq_subscription WHERE grp = 'backlog' AND renewals = 0 AND account LIKE ?", arguments: ["backlog-\(round)-%"]) ?? 0
        }
    }

    /// Waits until every subscription of round `round` renewed (at most `limit`); the seconds it took
    /// from `start`.
    func drained(round: Int, since start: ContinuousClock.Instant, limit: Duration = .seconds(300)) async throws -> Double {
        while try left(round: round) > 0 {
            guard ContinuousClock.now - start < limit else { throw ClusterFailure(description: "the renewal backlog was not worked through in \(limit)") }
            try await Task.sleep(for: .milliseconds(200))
        }
        let elapsed = (ContinuousClock.now - start).components
        return Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    }
}
