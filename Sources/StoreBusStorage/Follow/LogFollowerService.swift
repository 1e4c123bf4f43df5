import Logging
import ServiceLifecycle
import StoreBus
import StoreBusServer

/// Follows another service's event log into a ``LogReducer``, a page at a time, until the process
/// stops: each page's effects and its position committed together (``FollowedLog``), from the position
/// the follower's database holds. A log that ends before that position (its database was replaced) is
/// forgotten and applied again from its start. A reducer's effects are derived state: each page is
/// committed without waiting for the disk (``FollowedLog/apply(through:derived:_:)``), as a power
/// loss that takes pages back takes their position back too, and they are applied again. `applied` (when given) hears every position reached,
/// for calls that wait to read their own writes.
///
/// A sharded log (the payment queue's on PostgreSQL) is followed shard by shard, each shard a log of
/// its own with its own position (``FollowedLog/shard(_:)``), all at once; `shards` (when given) hears
/// how many there are, once the log said so.
public struct LogFollowerService<Reducer: LogReducer>: Service {
    let follower: EventFollower
    let log: FollowedLog
    let reducer: Reducer
    let applied: PositionWaiter<String>?
    let shards: LogShards?
    let logger: Logger

    /// A follower of `log` through `follower`, applying with `reducer`.
    public init(follower: EventFollower, log: FollowedLog, reducer: Reducer, applied: PositionWaiter<String>? = nil, shards: LogShards? = nil, logger: Logger) {
        self.follower = follower
        self.log = log
        self.reducer = reducer
        self.applied = applied
        self.shards = shards
        self.logger = logger
    }

    public func run() async throws {
        let (follower, log, reducer, applied, shards, logger) = (follower, log, reducer, applied, self.shards, logger)
        try await cancelWhenGracefulShutdown {
            try await follower.followEveryShard(found: { shards?.found($0) }) { shard in
                try await Self.follow(shard: shard, follower: follower, log: log.shard(shard), reducer: reducer, applied: applied, logger: logger)
            }
        }
        await follower.shutdown()
    }

    /// Follows one shard (the whole log, when it is not sharded) until cancelled.
    static func follow(shard: UInt32, follower: EventFollower, log: FollowedLog, reducer: Reducer, applied: PositionWaiter<String>?, logger: Logger) async throws {
        try await follower.followAlways(
            as: Reducer.Page.self,
            shard: shard,
            start: {
                let start = try await log.position()
                applied?.advance(log.name, to: start)
                return start
            },
            { records, through in
                // A page of events in none of the reducer's topics moves the position in memory
                // only: after a restart the log's pages step over them again.
                if !records.isEmpty {
                    try await log.apply(through: through, derived: true) { db in try reducer.apply(records, in: db) }
                }
                applied?.advance(log.name, to: through)
            },
            replaced: { error in
                logger.warning(
                    "A followed event log was replaced; applying it again from its start",
                    metadata: [
                        "log": "\(log.name)", "error": "\(error.message)"
                    ])
                try await log.forget { db in try reducer.forget(in: db) }
                applied?.reset(log.name)
            })
    }
}
