import Foundation
import StoreBusPostgres
import StoreBusStorage
import StoreSchema

/// The payment queue's log as shards, for the shard map (PaymentQueueAdmin.GetShardMap): on
/// PostgreSQL, the leases' view of every shard; on SQLite, one shard, this instance's.
public struct QueueShards: Sendable {
    /// The sharded log's leases (PostgreSQL); nil on SQLite.
    let leases: ShardLeases?
    /// Where this instance answers and rings doorbells (SQLite's one shard's owner).
    let endpoints: ShardLeases.Endpoints
    /// This instance's name on SQLite (the leases' on PostgreSQL).
    let instance: String

    public init(leases: ShardLeases?, endpoints: ShardLeases.Endpoints) {
        self.leases = leases
        self.endpoints = endpoints
        instance = leases?.instance ?? UUID().uuidString.lowercased()
    }

    /// Every shard with its owner, as the contract shows it.
    func map(_ database: any SQLDatabase) async throws -> Storebus_PaymentQueue_V1_GetShardMapResponse {
        let shards: [ShardLeases.Shard]
        if let leases {
            shards = try await leases.map()
        } else {
            let head = try await database.read { db in try EventLog.head(db, key: "") }
            shards = [ShardLeases.Shard(shard: 0, owner: instance, epoch: 1, leased: true, head: head, endpoints: endpoints)]
        }
        return .init(instance: instance, shardCount: leases?.shardCount ?? 1, shards: shards)
    }
}
