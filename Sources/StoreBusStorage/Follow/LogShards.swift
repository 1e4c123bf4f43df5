import StoreBus
import Synchronization

/// How many shards a followed log has, as its follower found out (1 until it has): for calls that
/// wait for the position of one account's shard (``positionKey(app:account:)``).
public final class LogShards: Sendable {
    /// The log's name.
    public let log: String
    private let count = Atomic<UInt32>(1)

    public init(log: String) {
        self.log = log
    }

    /// The number of shards.
    public var shardCount: UInt32 { count.load(ordering: .acquiring) }

    func found(_ shards: UInt32) {
        count.store(max(1, shards), ordering: .releasing)
    }

    /// The shard of `app`'s `account`.
    public func shard(app: String, account: String) -> UInt32 {
        ShardHash.shard(app: app, account: account, count: shardCount)
    }

    /// The name under which the follower advances the position of the shard of `app`'s `account`
    /// (``FollowedLog/name(_:shard:)``).
    public func positionKey(app: String, account: String) -> String {
        FollowedLog.name(log, shard: shard(app: app, account: account))
    }
}
