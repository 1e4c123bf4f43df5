import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

/// The payment queue on a PostgreSQL primary with a synchronous standby, kept by pg_auto_failover:
/// the primary is lost in the middle of purchases.
@Suite(.serialized)
struct PostgresFailoverTests {
    /// The transactions acknowledged so far, by idempotency key.
    final class Acknowledged: Sendable {
        let ids = Mutex<[String: String]>([:])
    }

    /// Buys coins for `account` under idempotency key `key` through `connection`, calling again with
    /// the same key after any failure (a commit whose outcome the failover left unknown among them)
    /// until it is answered, at most `timeout`; the transaction's identifier.
    static func purchase(_ connection: StoreConnection, account: String, key: String, timeout: Duration) async throws -> String {
        let end = ContinuousClock.now + timeout
        var lastError: (any Error)?
        while ContinuousClock.now < end {
            do {
                let answer = try await connection.call(
                    Storebus_PaymentQueue_V1_PaymentQueue.addPayment, coinsPayment(account: account, key: key), timeout: .seconds(5))
                return answer.transaction.transactionIdentifier
            } catch {
                lastError = error
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        throw ClusterFailure(description: "\(key) was never answered: \(String(describing: lastError))")
    }

    @Test(
        "the primary is killed while purchases run: once the standby is promoted they go on, every purchase acknowledged is there, and each key retried across the failover made one transaction and one charge"
    )
    func primaryLost() async throws {
        try await PostgresHA.running { ha in
            var settings = ha.settings()
            settings.shards = 2
            settings.leaseSeconds = 2
            try await StoreCluster(gatewayCount: 1, queuePostgres: settings).running { cluster in
                let accounts = ["ha-0", "ha-1", "ha-2"]
                let acknowledged = Acknowledged()
                // Each account buys one after another, each purchase under a key of its own; the
                // primary is killed once every account has bought a few times.
                let buyers = Task {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for account in accounts {
                            group.addTask {
                                let connection = try StoreConnection(configuration: cluster.configuration(account: account))
                                defer { Task { await connection.close() } }
                                for index in 0..<24 {
                                    let key = "\(account)-\(index)"
                                    let id = try await Self.purchase(connection, account: account, key: key, timeout: .seconds(90))
                                    acknowledged.ids.withLock { $0[key] = id }
                                }
                            }
                        }
                        try await group.waitForAll()
                    }
                }
                _ = await waitUntil(timeout: .seconds(60), interval: .milliseconds(20)) { acknowledged.ids.withLock { $0.count } >= 12 }
                #expect(acknowledged.ids.withLock { $0.count } >= 12, "purchases before the failover: \(cluster.logs)")
                await ha.kill(node: 0)
                try await ha.waitForPrimary(1)
                do {
                    try await buyers.value
                } catch {
                    Issue.record("\(error)\n\(cluster.logs)\n\(ha.logs.suffix(20_000))")
                    return
                }

                // Every purchase acknowledged is on the promoted standby, once: its key names it, it
                // is charged once, and no retry made another transaction.
                let keys = acknowledged.ids.withLock { $0 }
                #expect(keys.count == accounts.count * 24)
                let rows = try #require(
                    await PostgresHA.query(
                        port: ha.ports[1],
                        "SELECT string_agg(i.key || '=' || i.transaction_id || ':' || (SELECT count(*) FROM pq_charge c WHERE c.transaction_id = i.transaction_id), ',') FROM pq_idempotency i"
                    ))
                var stored: [String: String] = [:]
                for row in rows.split(separator: ",") {
                    let parts = row.split(separator: "=")
                    stored[String(parts[0])] = String(parts[1])
                }
                for (key, id) in keys {
                    #expect(stored[key] == "\(id):1", "\(key): acknowledged \(id), stored \(stored[key] ?? "nothing")")
                }
                let transactions = await PostgresHA.query(port: ha.ports[1], "SELECT count(*) FROM pq_transaction")
                #expect(transactions == "\(keys.count)", "one transaction a key")
            }
        }
    }
}
