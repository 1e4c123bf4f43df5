import GRDB
import StoreBus

/// Where the writer of a log takes each event's positions from: the next of its shard, and the next
/// of its key. A write that may have been undone makes it ``forget()``.
public protocol LogPositions: AnyObject, Sendable {
    /// The positions of the next event of `key`, in `shard`, taken within the transaction of `db`.
    func take(_ db: any SQLConnection, key: String, shard: UInt32) throws -> (seq: UInt64, keySeq: UInt64)
    /// Forgets what it remembers: appends may have been undone.
    func forget()
    /// Throws (UNAVAILABLE, NOT_OWNER) when this instance may not write to `shard` (it does not own
    /// it, as far as it knows): a write checks before it changes anything. Appends are still fenced
    /// in their transaction (``take(_:key:shard:)``); this spares the work of a write bound to fail.
    func check(shard: UInt32) throws
}

extension LogPositions {
    /// A log with one writer may always be written.
    public func check(shard: UInt32) throws {}
}

/// The log's last positions as its one writer left them, so that an append need not read them from
/// the table: the two `MAX` lookups of ``EventLog/readPositions(_:key:)`` were a fifth of an append's
/// instructions in the payment queue's profile (some 9K of 40K), three appends a purchase.
///
/// Sound only while every append to the log goes through this writer, in its transactions, one
/// after another: ``EventLogWriter`` keeps one per database, and the log's database belongs to one
/// service. Whatever may undo appends makes it forget: an append that fails, a write whose
/// savepoint is rolled back, a group whose transaction fails. What it has forgotten is read from the
/// table at the next append, inside that append's transaction, so it sees the writes of the group
/// before it.
///
/// It remembers at most ``maxKeys`` keys, then starts over: each key forgotten costs one read the
/// next time it appends.
public final class EventPositions: LogPositions, @unchecked Sendable {
    // Invariant for @unchecked Sendable: used only by the writer's commits, which run one at a time
    // (on the committer's thread, or on the reactor's loop).
    /// The last position of each shard known (one: 0, but for a log read as shards).
    private var lastSeqs: [UInt32: UInt64] = [:]
    /// The last position of each key known.
    private var lastKeySeqs: [String: UInt64] = [:]

    /// Keys remembered at most.
    static let maxKeys = 4096

    /// The positions of the next event of `key`, taken: the next call for the log, or for the key,
    /// gives the ones after them.
    public init() {}

    public func take(_ db: any SQLConnection, key: String, shard: UInt32) throws -> (seq: UInt64, keySeq: UInt64) {
        guard FastPaths.enabled else { return try EventLog.readPositions(db, key: key, shard: shard) }
        if let seq = lastSeqs[shard], let index = lastKeySeqs.index(forKey: key) {
            lastSeqs[shard] = seq + 1
            lastKeySeqs.values[index] += 1
            return (seq + 1, lastKeySeqs.values[index])
        }
        let next = try EventLog.readPositions(db, key: key, shard: shard)
        if lastKeySeqs.count >= Self.maxKeys { lastKeySeqs.removeAll(keepingCapacity: true) }
        lastSeqs[shard] = next.seq
        lastKeySeqs[key] = next.keySeq
        return next
    }

    /// Forgets every position: appends may have been undone.
    public func forget() {
        lastSeqs.removeAll(keepingCapacity: true)
        lastKeySeqs.removeAll(keepingCapacity: true)
    }
}
