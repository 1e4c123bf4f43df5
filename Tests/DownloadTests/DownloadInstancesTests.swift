import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// Several download instances on PostgreSQL: they split the payment queue's shards, each serving the
/// downloads of its shards' accounts; the gateway sends a device's download calls to the owner; one
/// lost, the other takes its shards and their downloads over.
@Suite(.serialized)
struct DownloadInstancesTests {
    @Test(
        "two download instances on PostgreSQL split the queue's four shards; devices of every shard download through the gateway's routing; an instance asked for a shard it does not serve refuses NOT_OWNER naming it; one killed, the other serves every shard"
    )
    func twoInstances() async throws {
        try await PostgresServer.running { server in
            var queue = server.settings()
            queue.shards = 4
            queue.leaseSeconds = 2
            var downloads = try await server.createDatabase("downloads")
            downloads.leaseSeconds = 2
            try await StoreCluster(gatewayCount: 1, queuePostgres: queue, downloadPostgres: downloads, downloadInstances: 2).running { cluster in
                func map(_ index: Int) async throws -> Storebus_PaymentQueue_V1_GetShardMapResponse {
                    try await withRPCClient(endpoints: [cluster.downloadEndpoints[index]]) { client in
                        try await client.call(Storebus_Download_V1_Download.getShardMap, .init())
                    }
                }
                var split: Storebus_PaymentQueue_V1_GetShardMapResponse?
                _ = await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) {
                    split = try? await map(0)
                    return split.map { map in Set(map.shards.map(\.owner)).count == 2 && map.shards.allSatisfy(\.leased) } ?? false
                }
                let before = try #require(split, "the instances never split the shards: \(cluster.logs)")
                #expect(Set(before.shards.map(\.owner)).count == 2 && before.shards.allSatisfy(\.leased), "\(before)")

                let accounts = accountsByShard(prefix: "downloads", count: 4)
                let expected = try Data(contentsOf: deployDirectory.appendingPathComponent("content/puzzle-levelpack1/levels.json"))
                func buyAndDownload(device: String) async throws {
                    for (shard, account) in accounts.sorted(by: { $0.key < $1.key }) {
                        let phone = try PaymentQueue(configuration: cluster.configuration(account: account, device: device))
                        let recorder = Recorder(phone)
                        #expect(await recorder.attached(), "shard \(shard)")
                        let bought = try await phone.addPayment(Payment(productIdentifier: levelPack))
                        #expect(await recorder.purchased(bought.id), "shard \(shard): \(cluster.logs)")
                        let transaction = try #require(phone.transactions.first { $0.id == bought.id })
                        let download = try #require(transaction.downloads.first)
                        try await phone.startDownloads([download])
                        #expect(await recorder.download(bought.id, reaches: .finished), "shard \(shard): \(cluster.logs)")
                        let folder = try #require(recorder.lastDownload(of: bought.id)?.contentURL)
                        #expect(try Data(contentsOf: folder.appendingPathComponent("Contents/levels.json")) == expected, "shard \(shard)")
                        try? FileManager.default.removeItem(at: folder.deletingLastPathComponent())
                        await phone.close()
                    }
                }
                try await buyAndDownload(device: "phone")
                // Once the gateway has the map, every call goes straight to its shard's owner: no
                // instance refuses one (a plain client would send half of them to the other, which
                // refuses them, NOT_OWNER, and then again elsewhere).
                let refusedBefore = try await Self.refusals(cluster)
                try await buyAndDownload(device: "tablet")
                let refusedAfter = try await Self.refusals(cluster)
                #expect(refusedAfter == refusedBefore, "calls refused by a download instance not serving their shard: \(refusedBefore) before, \(refusedAfter) after")

                // Asked directly about a queue of a shard it does not serve, an instance refuses,
                // naming the shard (the gateway's router goes to the owner instead).
                let first = try await map(0)
                let (foreignShard, foreign) = try #require(accounts.first { shard, _ in first.shards[Int(shard)].owner != first.instance })
                let refused = await #expect(throws: RPCError.self) {
                    _ = try await withRPCClient(endpoints: [cluster.downloadEndpoints[0]]) { client in
                        try await client.call(
                            Storebus_Download_V1_Download.getDownloads,
                            .with {
                                $0.queue = .with {
                                    $0.appBundleID = puzzle; $0.accountID = foreign; $0.deviceID = "phone"
                                }
                            })
                    }
                }
                #expect(refused?.isNotOwner == true && refused?.notOwnerShard == foreignShard, "\(String(describing: refused))")

                // One instance dies: once the survivor holds every shard, devices of every shard
                // download again.
                let dying = try await map(1).instance
                await cluster.downloads[1].kill()
                var after: Storebus_PaymentQueue_V1_GetShardMapResponse?
                _ = await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) {
                    after = try? await map(0)
                    return after.map { map in map.shards.allSatisfy { $0.owner == map.instance && $0.leased } } ?? false
                }
                #expect(after.map { map in map.shards.allSatisfy { $0.owner == map.instance && $0.leased } } == true, "\(String(describing: after))")
                for shard in before.shards where shard.owner == dying {
                    let now = after?.shards.first { $0.shard == shard.shard }
                    #expect(now.map { $0.epoch > shard.epoch } == true, "shard \(shard.shard) taken over with a new epoch")
                }
                try await buyAndDownload(device: "watch")
            }
        }
    }

    /// How many calls the download instances answered UNAVAILABLE (their metrics'
    /// `storebus_rpc_calls_total` with that code), in all.
    static func refusals(_ cluster: StoreCluster) async throws -> Int {
        var total = 0
        for address in cluster.downloadMetricsAddresses {
            let page = try await runCommand("/usr/bin/curl", ["-sS", "--max-time", "10", "http://\(address)/metrics"])
            for line in page.output.split(separator: "\n") where line.hasPrefix("storebus_rpc_calls_total{") && line.lowercased().contains("unavailable") {
                total += Int(Double(line.split(separator: " ").last ?? "0") ?? 0)
            }
        }
        return total
    }
}
