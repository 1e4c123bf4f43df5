import Foundation
import StoreBus
import StoreBusPostgres
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing

/// `storectl admin shards`: the payment queue's shard map through a gateway, on SQLite (one shard)
/// and on PostgreSQL (several, one instance owning them all).
@Suite("storectl admin shards", .serialized)
struct ShardMapTests {
    /// Runs storectl against the cluster's first gateway; its exit status and output.
    static func storectl(_ cluster: StoreCluster, _ arguments: [String], name: String) async throws -> (Int32?, String) {
        let process = ServiceProcess(
            name: "storectl", arguments: arguments + ["--gateway", cluster.gatewayEndpoints[0]], logFile: cluster.directory.url.appendingPathComponent("\(name).log"))
        try process.start(environment: ["STOREBUS_API_KEY": appKey, "STOREBUS_ADMIN_KEY": adminKey, "STOREBUS_DOWNLOAD_DIR": cluster.directory.path("downloads")])
        let status = await process.waitForExit(timeout: .seconds(120))
        return (status, process.output)
    }

    /// The table's shard lines as (shard, owner, epoch, lease, head).
    static func rows(_ output: String) -> [(shard: UInt32, owner: String, epoch: UInt64, lease: String, head: UInt64)] {
        output.split(separator: "\n").dropFirst(2).compactMap { line in
            let words = line.split(separator: " ")
            guard words.count >= 5, let shard = UInt32(words[0]), let epoch = UInt64(words[2]), let head = UInt64(words[4]) else { return nil }
            return (shard, String(words[1]), epoch, String(words[3]), head)
        }
    }

    @Test("on SQLite: one shard, owned by the instance that answers, its head the log's")
    func sqlite() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let (demoStatus, demo) = try await Self.storectl(cluster, ["demo", "--account", "frank"], name: "demo")
            #expect(demoStatus == 0, "\(demo)")
            let (status, output) = try await Self.storectl(cluster, ["admin", "shards"], name: "shards")
            #expect(status == 0, "\(output)")
            #expect(output.hasPrefix("1 shard, answered by instance "), "\(output)")
            let rows = Self.rows(output)
            #expect(rows.count == 1, "\(output)")
            #expect(rows.first?.lease == "running" && (rows.first?.head ?? 0) > 0, "\(output)")
            #expect(output.contains(cluster.queue.arguments[cluster.queue.arguments.firstIndex(of: "--rpc-endpoint")! + 1]), "the owner's endpoint: \(output)")
        }
    }

    @Test(
        "on PostgreSQL with four shards: storectl demo for accounts of several shards (receipts, downloads and notifications follow every shard); every shard owned by the one instance (epoch 1, lease running); the shards of the accounts that bought have a head"
    )
    func postgres() async throws {
        try await PostgresServer.running { server in
            var settings = server.settings()
            settings.shards = 4
            try await StoreCluster(gatewayCount: 1, queuePostgres: settings).running { cluster in
                let accounts = ["frank", "gina", "hal"]
                // The whole demo (a purchase, the receipt refreshed and verified, hosted content
                // downloaded) for accounts in several shards: the receipt and download services
                // follow every shard, each to its own position.
                for account in accounts {
                    let (status, output) = try await Self.storectl(cluster, ["demo", "--account", account], name: "demo-\(account)")
                    #expect(status == 0, "\(output)")
                }
                // The notification service follows every shard too: each purchase is notified once.
                let watch = ServiceProcess(
                    name: "storectl",
                    arguments: ["notifications", "watch", "--gateway", cluster.gatewayEndpoints[0], "--app", puzzle, "--after", "0", "--count", "6"],
                    logFile: cluster.directory.url.appendingPathComponent("watch.log"))
                try watch.start(environment: ["STOREBUS_SERVER_KEY": serverKey])
                #expect(await watch.waitForExit(timeout: .seconds(120)) == 0, "\(watch.output)")
                let charges = watch.output.split(separator: "\n").filter { $0.contains("ONE_TIME_CHARGE") }
                #expect(charges.count == 6, "\(watch.output)")
                for account in accounts {
                    #expect(charges.filter { $0.contains("account=\(account)") }.count == 2, "\(account): \(watch.output)")
                }
                let transactions = charges.compactMap { line in line.split(separator: " ").first { $0.hasPrefix("transaction=") } }
                #expect(Set(transactions).count == 6, "\(watch.output)")

                let (status, output) = try await Self.storectl(cluster, ["admin", "shards"], name: "shards")
                #expect(status == 0, "\(output)")
                #expect(output.hasPrefix("4 shards, answered by instance "), "\(output)")
                let rows = Self.rows(output)
                #expect(rows.map(\.shard) == [0, 1, 2, 3], "\(output)")
                let instance = String(output.split(separator: "\n")[0].split(separator: " ").last ?? "")
                #expect(rows.allSatisfy { $0.owner == instance && $0.epoch == 1 && $0.lease == "running" }, "\(output)")
                let used = Set(accounts.map { ShardHash.shard(app: puzzle, account: $0, count: 4) })
                for row in rows {
                    #expect((row.head > 0) == used.contains(row.shard), "shard \(row.shard): \(output)")
                }
            }
        }
    }
}
