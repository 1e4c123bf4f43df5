import Logging
import StoreBusStorage
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

    /// The shards this instance holds (none before ``start(shardCount:)``).
    public var held: [UInt32] {
        (leases.withLock { $0?.ownership.keys }).map { Array($0).sorted() } ?? []
    }
}
