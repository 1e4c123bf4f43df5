import Foundation
import StoreBus
import StoreBusPostgres
import StoreBusStorage
import StoreSchema

/// The payment queue's shards as this service's instances split them: which ones this instance
/// serves (the ledger holds their downloads), and the shard map a router asks for (Download.GetShardMap).
struct DownloadShards: Sendable {
    /// The leases of several instances on PostgreSQL; nil for one instance.
    let leases: FollowerShardLeases?
    /// Where this instance answers.
    let endpoints: ShardLeases.Endpoints
    let ledger: DownloadLedger
    let shards: LogShards
    let applied: PositionWaiter<String>
    /// This instance's name when it is the only one.
    let instance = UUID().uuidString.lowercased()

    /// UNAVAILABLE, reason NOT_OWNER, naming the shard, unless this instance serves `queue`'s.
    func check(_ queue: Storebus_PaymentQueue_V1_QueueRef) throws(RPCError) {
        let shard = shards.shard(app: queue.appBundleID, account: queue.accountID)
        guard ledger.serves(shard: shard) else {
            throw RPCError.notOwner(
                shard: shard,
                "this download instance does not serve shard \(shard) of the payment queue's log (another instance follows it): ask the shard map again")
        }
    }

    /// The shard of queue `key` (`<app>|<account>|<device>`).
    func shard(ofQueueKey key: String) -> UInt32 {
        ShardHash.shard(ofQueueKey: key, count: shards.shardCount)
    }

    /// Every shard with the instance serving it and how far that instance applied it (this
    /// instance's shards: its own position; the others': the position last read from the database).
    func map() async throws -> Storebus_PaymentQueue_V1_GetShardMapResponse {
        let head = { (shard: UInt32) in applied.position(FollowedLog.name(DownloadLedger.log, shard: shard)) }
        guard let leases else {
            let count = shards.shardCount
            return .init(
                instance: instance, shardCount: count,
                shards: (0..<count).map { ShardLeases.Shard(shard: $0, owner: instance, epoch: 1, leased: true, head: head($0), endpoints: endpoints) })
        }
        guard let current = leases.current else {
            throw RPCError(.unavailable, "this download instance has not yet taken its share of the payment queue's shards; try again")
        }
        let shards = try await current.map().map { shard in
            var shard = shard
            shard.head = head(shard.shard)
            return shard
        }
        return .init(instance: current.instance, shardCount: current.shardCount, shards: shards)
    }
}
