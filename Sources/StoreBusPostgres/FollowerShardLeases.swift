import Logging
import StoreBusStorage
import StoreSchema
import Synchronization

/// The shards of another service's log that the instances of its follower (the receipt service's,
/// the download service's) split among themselves, through ``ShardLeases`` in the follower's own
/// database: the leases of `logName`, as many as the followed log has shards (known once it said so).
public final class FollowerShardLeases: FollowerLeases {
    let database: PostgresDatabase
    let logName: String
    let lease: Duration
    let endpoints: ShardLeases.Endpoints
    let logger: Logger
    private let leases = Mutex<ShardLeases?>(nil)

    /// Leases of `database` on the shards of `logName`, each lasting `lease` unless renewed; this
    /// instance answers at `endpoints`.
    public init(database: PostgresDatabase, logName: String, lease: Duration, endpoints: ShardLeases.Endpoints, logger: Logger) {
        self.database = database
        self.logName = logName
        self.lease = lease
        self.endpoints = endpoints
        self.logger = logger
    }

    public func start(shardCount: UInt32) async throws {
        let made = try ShardLeases(database: database, logName: logName, shardCount: shardCount, lease: lease, endpoints: endpoints, logger: logger)
        try await made.round()
        leases.withLock { $0 = made }
    }

    public func keep() async {
        guard let leases = leases.withLock({ $0 }) else { return }
        await leases.run()
    }

    public func holds(_ shard: UInt32) -> Bool {
        leases.withLock { $0?.epoch(of: shard) != nil }
    }

    /// The leases, once ``start(shardCount:)`` made them (the shard map's source).
    public var current: ShardLeases? {
        leases.withLock { $0 }
    }
}

extension Storebus_PaymentQueue_V1_GetShardMapResponse {
    /// The shard map as `instance` answers it: `shardCount` shards, each with its owner as `shards`
    /// has it.
    public init(instance: String, shardCount: UInt32, shards: [ShardLeases.Shard]) {
        self.init()
        self.shardCount = shardCount
        self.instance = instance
        self.shards = shards.map { shard in
            .with {
                $0.shard = shard.shard
                $0.owner = shard.owner
                $0.epoch = shard.epoch
                $0.leased = shard.leased
                $0.headSeq = shard.head
                $0.rpcEndpoints = shard.endpoints.rpc
                $0.eventEndpoints = shard.endpoints.events
            }
        }
    }
}
