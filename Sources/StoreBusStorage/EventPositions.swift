import GRDB
import StoreBus

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
final class EventPositions: @unchecked Sendable {
    // Invariant for @unchecked Sendable: used only by the writer's commits, which run one at a time
    // (on the committer's thread, or on the reactor's loop).
    /// The last position of the whole log, when known.
    private var lastSeq: UInt64?
    /// The last position of each key known.
    private var lastKeySeqs: [String: UInt64] = [:]

    /// Keys remembered at most.
    static let maxKeys = 4096

    /// The positions of the next event of `key`, taken: the next call for the log, or for the key,
    /// gives the ones after them.
    func take(_ db: any SQLConnection, key: String) throws -> (seq: UInt64, keySeq: UInt64) {
        guard FastPaths.enabled else { return try EventLog.readPositions(db, key: key) }
        if let seq = lastSeq, let index = lastKeySeqs.index(forKey: key) {
            lastSeq = seq + 1
            lastKeySeqs.values[index] += 1
            return (seq + 1, lastKeySeqs.values[index])
        }
        let next = try EventLog.readPositions(db, key: key)
        if lastKeySeqs.count >= Self.maxKeys { lastKeySeqs.removeAll(keepingCapacity: true) }
        lastSeq = next.seq
        lastKeySeqs[key] = next.keySeq
        return next
    }

    /// Forgets every position: appends may have been undone.
    func forget() {
        lastSeq = nil
        lastKeySeqs.removeAll(keepingCapacity: true)
    }
}
