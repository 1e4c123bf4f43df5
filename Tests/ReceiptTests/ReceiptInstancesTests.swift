import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// Several receipt instances on PostgreSQL: they split the payment queue's shards among them, each
/// following its own, and answer for any account; they sign with one authority; one lost, the other
/// takes its shards over.
@Suite(.serialized)
struct ReceiptInstancesTests {
    @Test(
        "two receipt instances on PostgreSQL split the queue's four shards; either answers for any account as of its device's last callback; a key rotated at one signs at the other; one killed, the other takes its shards over"
    )
    func twoInstances() async throws {
        try await PostgresServer.running { server in
            var queue = server.settings()
            queue.shards = 4
            queue.leaseSeconds = 2
            var receipts = try await server.createDatabase("receipts")
            receipts.leaseSeconds = 2
            try await StoreCluster(gatewayCount: 1, queuePostgres: queue, receiptPostgres: receipts, receiptInstances: 2).running { cluster in
                func owners() async -> [String: Int] {
                    let rows =
                        await PostgresHA.query(
                            port: server.port, user: PostgresServer.user, database: "receipts",
                            "SELECT owner, COUNT(*) FROM storebus_shard WHERE expires_at > clock_timestamp() GROUP BY owner") ?? ""
                    return Dictionary(
                        uniqueKeysWithValues: rows.split(separator: "\n").compactMap { line in
                            let parts = line.split(separator: "|")
                            return parts.count == 2 ? (String(parts[0]), Int(parts[1]) ?? 0) : nil
                        })
                }
                var split: [String: Int] = [:]
                _ = await waitUntil(timeout: .seconds(30), interval: .milliseconds(200)) {
                    split = await owners()
                    return split.values.sorted() == [2, 2]
                }
                #expect(split.values.sorted() == [2, 2], "the instances never split the shards: \(split)")

                // An account in each shard buys; each instance answers for every one of them as of
                // the device's last callback: for its own shards from what it applied, for the
                // other's from the positions the other stored.
                let accounts = accountsByShard(prefix: "receipts", count: 4)
                func buyAndCheck(_ endpoints: [String], product: String) async throws {
                    for (shard, account) in accounts.sorted(by: { $0.key < $1.key }) {
                        let (phone, recorder) = try await cluster.launch(account: account)
                        let bought = try await phone.addPayment(Payment(productIdentifier: product))
                        #expect(await recorder.purchased(bought.id), "shard \(shard): \(cluster.logs)")
                        let position = phone.acknowledgedPosition
                        for endpoint in endpoints {
                            let answer = try await withRPCClient(endpoints: [endpoint]) { client in
                                try await client.call(
                                    Storebus_Receipt_V1_Receipt.getEntitlements,
                                    .with {
                                        $0.appBundleID = puzzle
                                        $0.accountID = account
                                        $0.deviceID = "phone"
                                        $0.minQueueSeq = position
                                    }, options: CallOptions(timeout: .seconds(10)))
                            }
                            #expect(answer.entitlements.contains { $0.productIdentifier == product }, "shard \(shard) at \(endpoint): \(answer)")
                        }
                        // Finished, so that the device's next launch replays nothing.
                        try await phone.finish(try #require(phone.transactions.first { $0.id == bought.id }))
                        #expect(await recorder.wait { $0.removed(bought.id) })
                        await phone.close()
                    }
                }
                try await buyAndCheck(cluster.receiptEndpoints, product: levelPack)

                // One authority: the same root at both; a leaf issued at one is signed with at the other.
                func certificates(_ endpoint: String) async throws -> Storebus_Receipt_V1_GetSigningCertificatesResponse {
                    try await withRPCClient(endpoints: [endpoint]) { client in try await client.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init()) }
                }
                let first = try await certificates(cluster.receiptEndpoints[0])
                let second = try await certificates(cluster.receiptEndpoints[1])
                #expect(first.rootCertificatePem == second.rootCertificatePem)
                let rotated = try await withRPCClient(endpoints: [cluster.receiptEndpoints[0]]) { client in
                    try await client.call(Storebus_Receipt_V1_Receipt.rotateSigningKey, .init())
                }
                #expect(
                    await waitUntil(timeout: .seconds(20)) { (try? await certificates(cluster.receiptEndpoints[1]))?.leafCertificatesPem.first == rotated.leafCertificatePem },
                    "the other instance never took the new leaf up")

                // One instance dies: the other takes its shards over once their leases lapse, and
                // answers for every account.
                await cluster.receipts[1].kill()
                _ = await waitUntil(timeout: .seconds(30), interval: .milliseconds(200)) {
                    split = await owners()
                    return split.values.sorted() == [4]
                }
                #expect(split.values.sorted() == [4], "the survivor never took every shard: \(split)")
                try await buyAndCheck([cluster.receiptEndpoints[0]], product: removeAds)
            }
        }
    }
}
