import Foundation
import Logging
import StoreBus
import StoreBusStorage
import StoreSchema
import Synchronization

/// The shards of a sharded log on PostgreSQL, and the share of them this instance owns.
///
/// A log created with S shards has one row per shard in `storebus_shard`: its owner, the owner's
/// epoch and when the owner's lease lapses (PostgreSQL's clock: the instances' clocks never count);
/// and one in `storebus_shard_position`: its last position (apart, so that the leases' rounds and
/// the writers never wait for each other's row locks). Each instance of the service keeps a row in `storebus_instance` alive, and
/// on every round (a third of the lease time) renews the leases it holds, takes lapsed ones up to
/// its fair share (the shards divided among the live instances, rounded up), and lets go of any
/// beyond it, so that a new instance gets its share. Taking a shard over adds one to its epoch.
///
/// Every append to a shard's log (``ShardPositions``) moves the shard's position in the same
/// transaction, on condition that this instance still owns it with the epoch it took it with and
/// that the lease has not lapsed: an instance that was paused past its lease, and woke up, can no
/// longer write (fencing). Its writer's connection also ends a transaction left idle longer than
/// the lease (`idle_in_transaction_session_timeout`), so that a paused instance holds no row lock
/// that would keep the others from taking its shards over.
public final class ShardLeases: Sendable {
    /// The log's name (`payment-queue`).
    public let logName: String
    /// How many shards the log has (fixed when its database was made).
    public let shardCount: UInt32
    /// This instance's name: unique per process (a fresh UUID at each start).
    public let instance: String
    /// How long a lease lasts unless renewed.
    public let lease: Duration
    /// Where this instance answers calls and rings doorbells, for the shard map.
    public let endpoints: Endpoints
    private let worker: Worker
    private let owned = Mutex<[UInt32: UInt64]>([:])
    private let logger: Logger

    deinit {
        worker.stop()
    }

    /// The endpoints an instance advertises.
    public struct Endpoints: Sendable, Equatable {
        public var rpc: [String]
        public var events: [String]
        public init(rpc: [String], events: [String]) {
            self.rpc = rpc
            self.events = events
        }
    }

    /// One shard as the map shows it.
    public struct Shard: Sendable, Equatable {
        public var shard: UInt32
        public var owner: String
        public var epoch: UInt64
        /// Whether the owner's lease is still running.
        public var leased: Bool
        /// The last position given.
        public var head: UInt64
        /// The owner's endpoints (empty when it has none alive).
        public var endpoints: Endpoints

        public init(shard: UInt32, owner: String, epoch: UInt64, leased: Bool, head: UInt64, endpoints: Endpoints) {
            self.shard = shard
            self.owner = owner
            self.epoch = epoch
            self.leased = leased
            self.head = head
            self.endpoints = endpoints
        }
    }

    /// The log `logName` of `database`, with `shardCount` shards: made with that many when it has
    /// none yet; refused (FAILED_PRECONDITION) when it was made with another number.
    public init(database: PostgresDatabase, logName: String, shardCount: UInt32, lease: Duration, endpoints: Endpoints, logger: Logger) throws {
        guard shardCount >= 1, shardCount <= 4096 else { throw StartupError("shards: from 1 to 4096") }
        self.logName = logName
        self.shardCount = shardCount
        self.instance = UUID().uuidString.lowercased()
        self.lease = lease
        self.endpoints = endpoints
        self.logger = logger
        worker = database.makeWorker(name: "storebus-pg-lease")
        try worker.sync { session in
            try PostgresDatabase.inTransaction(session, begin: "BEGIN") { db in
                try db.execute(cached: "SELECT pg_advisory_xact_lock(7130572)")
                let existing = try db.value(Int64.self, cached: "SELECT COUNT(*) FROM storebus_shard WHERE log = ?", arguments: [logName]) ?? 0
                if existing == 0 {
                    try db.execute(
                        cached: "INSERT INTO storebus_shard (log, shard) SELECT ?, s FROM generate_series(0, ? - 1) AS s",
                        arguments: [logName, Int64(shardCount)])
                    try db.execute(
                        cached: "INSERT INTO storebus_shard_position (log, shard) SELECT ?, s FROM generate_series(0, ? - 1) AS s",
                        arguments: [logName, Int64(shardCount)])
                } else if existing != Int64(shardCount) {
                    throw RPCError(
                        .failedPrecondition,
                        "the \(logName) log in this database has \(existing) shards, and this instance is configured for \(shardCount): the number is fixed when the database is made")
                }
            }
        }
    }

    /// The shards this instance owns, with the epoch of each.
    public var ownership: [UInt32: UInt64] { owned.withLock { $0 } }

    /// The epoch this instance owns `shard` with; nil when it does not own it.
    public func epoch(of shard: UInt32) -> UInt64? { owned.withLock { $0[shard] } }

    /// The shard of queue key `key` (`<app>|<account>|<device>`): the hash of its app and account.
    public func shard(ofKey key: String) -> UInt32 { ShardHash.shard(ofQueueKey: key, count: shardCount) }

    /// Renews, takes and lets go of leases until cancelled, a round every third of the lease time;
    /// then lets go of every shard it owns, at once, so that the others take them without waiting
    /// for the leases to lapse. `taken` is called after a round that took a shard (its work, due
    /// meanwhile, is this instance's now).
    public func run(taken: @Sendable () -> Void = {}) async {
        while !Task.isCancelled {
            do {
                let before = ownership
                let after = try await round()
                if after.contains(where: { before[$0.key] != $0.value }) { taken() }
            } catch {
                logger.warning("Shard leases: a round failed; the leases held run on until they lapse", metadata: ["log": "\(logName)", "error": "\(error)"])
            }
            try? await Task.sleep(for: lease / 3)
        }
        try? await releaseAll()
    }

    /// One round: keeps this instance alive, renews its leases, takes lapsed shards up to its
    /// share, lets go of those beyond it. Returns the shards owned after it.
    @discardableResult
    public func round() async throws -> [UInt32: UInt64] {
        let (logName, instance, milliseconds, count, endpoints) = (logName, instance, Int64(lease / .milliseconds(1)), Int64(shardCount), endpoints)
        let now = try await worker.run { session -> [UInt32: UInt64] in
            try PostgresDatabase.inTransaction(session, begin: "BEGIN") { db in
                try db.execute(
                    cached: Self.heartbeatSQL,
                    arguments: [logName, instance, endpoints.rpc.joined(separator: " "), endpoints.events.joined(separator: " "), milliseconds])
                var held: [UInt32: UInt64] = [:]
                try db.forEachRow(
                    cached: Self.renewSQL,
                    bind: {
                        $0.int(milliseconds)
                        $0.text(logName)
                        $0.text(instance)
                    }
                ) { held[UInt32($0.int64(0))] = UInt64($0.int64(1)) }
                let live = max(1, try db.value(Int64.self, cached: Self.liveSQL, arguments: [logName]) ?? 1)
                let share = Int((count + live - 1) / live)
                if held.count < share {
                    try db.forEachRow(
                        cached: Self.takeSQL,
                        bind: {
                            $0.text(instance)
                            $0.int(milliseconds)
                            $0.text(logName)
                            $0.text(logName)
                            $0.int(Int64(share - held.count))
                        }
                    ) { held[UInt32($0.int64(0))] = UInt64($0.int64(1)) }
                } else if held.count > share {
                    // The highest shards go: each instance lets go of the same ones, so they do
                    // not move back and forth.
                    for shard in held.keys.sorted().suffix(held.count - share) {
                        // Writes refuse it from now on, before another instance can take it.
                        _ = self.owned.withLock { $0.removeValue(forKey: shard) }
                        try db.execute(cached: Self.releaseSQL, arguments: [logName, Int64(shard), instance])
                        held[shard] = nil
                    }
                }
                return held
            }
        }
        let before = owned.withLock { owned in
            let before = owned
            owned = now
            return before
        }
        if before != now {
            let taken = now.filter { before[$0.key] != $0.value }.keys.sorted()
            let lost = before.keys.filter { now[$0] == nil }.sorted()
            logger.info("Shard leases changed", metadata: ["log": "\(logName)", "owned": "\(now.count)/\(shardCount)", "taken": "\(taken)", "released": "\(lost)"])
        }
        return now
    }

    /// Lets go of every shard this instance owns and leaves the instance list (a process stopping).
    public func releaseAll() async throws {
        let (logName, instance) = (logName, instance)
        owned.withLock { $0.removeAll() }
        try await worker.run { session in
            try PostgresDatabase.inTransaction(session, begin: "BEGIN") { db in
                try db.execute(cached: "UPDATE storebus_shard SET expires_at = '-infinity' WHERE log = ? AND owner = ?", arguments: [logName, instance])
                try db.execute(cached: "DELETE FROM storebus_instance WHERE log = ? AND instance = ?", arguments: [logName, instance])
            }
        }
    }

    /// Every shard: its owner, epoch, lease, head and the owner's endpoints.
    public func map() async throws -> [Shard] {
        let logName = logName
        return try await worker.run { session in
            try PostgresDatabase.inTransaction(session, begin: "BEGIN TRANSACTION READ ONLY") { db in
                var shards: [Shard] = []
                try db.forEachRow(cached: Self.mapSQL, bind: { $0.text(logName) }) { row in
                    shards.append(
                        Shard(
                            shard: UInt32(row.int64(0)), owner: row.text(1), epoch: UInt64(row.int64(2)), leased: row.bool(3), head: UInt64(row.int64(4)),
                            endpoints: Endpoints(rpc: Self.words(row.text(5)), events: Self.words(row.text(6)))))
                }
                return shards
            }
        }
    }

    static func words(_ text: String) -> [String] { text.split(separator: " ").map(String.init) }

    static let heartbeatSQL: CachedSQL = """
        INSERT INTO storebus_instance (log, instance, rpc_endpoints, event_endpoints, expires_at)
        VALUES (?, ?, ?, ?, clock_timestamp() + make_interval(secs => ?5 / 1000.0))
        ON CONFLICT (log, instance) DO UPDATE SET expires_at = excluded.expires_at, rpc_endpoints = excluded.rpc_endpoints,
            event_endpoints = excluded.event_endpoints
        """
    static let renewSQL: CachedSQL = """
        UPDATE storebus_shard SET expires_at = clock_timestamp() + make_interval(secs => ?1 / 1000.0)
        WHERE log = ?2 AND owner = ?3 AND expires_at > clock_timestamp() RETURNING shard, epoch
        """
    static let liveSQL: CachedSQL = "SELECT COUNT(*) FROM storebus_instance WHERE log = ? AND expires_at > clock_timestamp()"
    static let takeSQL: CachedSQL = """
        UPDATE storebus_shard SET owner = ?1, epoch = epoch + 1, expires_at = clock_timestamp() + make_interval(secs => ?2 / 1000.0)
        WHERE log = ?3 AND shard IN (
            SELECT shard FROM storebus_shard WHERE log = ?4 AND expires_at <= clock_timestamp() ORDER BY shard LIMIT ?5 FOR UPDATE SKIP LOCKED)
        RETURNING shard, epoch
        """
    static let releaseSQL: CachedSQL = "UPDATE storebus_shard SET expires_at = '-infinity' WHERE log = ? AND shard = ? AND owner = ?"
    static let mapSQL: CachedSQL = """
        SELECT s.shard, s.owner, s.epoch, s.expires_at > clock_timestamp(), p.seq, COALESCE(i.rpc_endpoints, ''), COALESCE(i.event_endpoints, '')
        FROM storebus_shard s JOIN storebus_shard_position p ON p.log = s.log AND p.shard = s.shard
        LEFT JOIN storebus_instance i ON i.log = s.log AND i.instance = s.owner AND i.expires_at > clock_timestamp()
        WHERE s.log = ? ORDER BY s.shard
        """
}

/// Where a sharded log's writer takes positions: from its shard's row, moved in the append's own
/// transaction on condition that this instance still owns the shard with its epoch and lease (one
/// round trip an event, the fencing with it); a key's position from memory while the shard stays
/// owned with the same epoch, from the table otherwise.
final class ShardPositions: LogPositions, @unchecked Sendable {
    // Invariant for @unchecked Sendable: used only by the writer's commits, one at a time.
    let leases: ShardLeases
    private var lastKeySeqs: [String: (epoch: UInt64, keySeq: UInt64)] = [:]

    /// Keys remembered at most (then it starts over).
    static let maxKeys = 4096

    init(leases: ShardLeases) {
        self.leases = leases
    }

    func take(_ db: any SQLConnection, key: String, shard: UInt32) throws -> (seq: UInt64, keySeq: UInt64) {
        guard let epoch = leases.epoch(of: shard) else { throw Self.notOwner(shard, leases) }
        let moved = try db.fetchFirst(
            cached: Self.advanceSQL,
            bind: {
                $0.text(leases.logName)
                $0.int(Int64(shard))
                $0.text(leases.instance)
                $0.int(Int64(epoch))
            }
        ) { UInt64($0.int64(0)) }
        guard let seq = moved else { throw Self.notOwner(shard, leases) }
        let keySeq: UInt64
        if let known = lastKeySeqs[key], known.epoch == epoch {
            keySeq = known.keySeq + 1
        } else {
            keySeq = (try db.value(UInt64.self, cached: Self.keyHeadSQL, arguments: [key]) ?? 0) + 1
        }
        if lastKeySeqs.count >= Self.maxKeys { lastKeySeqs.removeAll(keepingCapacity: true) }
        lastKeySeqs[key] = (epoch, keySeq)
        return (seq, keySeq)
    }

    func forget() {
        lastKeySeqs.removeAll(keepingCapacity: true)
    }

    func check(shard: UInt32) throws {
        guard leases.epoch(of: shard) != nil else { throw Self.notOwner(shard, leases) }
    }

    static func notOwner(_ shard: UInt32, _ leases: ShardLeases) -> RPCError {
        RPCError.notOwner(shard: shard, "this instance does not own shard \(shard) of the \(leases.logName) log (its lease lapsed or went to another instance): ask the shard map again")
    }

    static let advanceSQL: CachedSQL = """
        UPDATE storebus_shard_position SET seq = seq + 1
        WHERE log = ?1 AND shard = ?2
          AND EXISTS (SELECT 1 FROM storebus_shard WHERE log = ?1 AND shard = ?2 AND owner = ?3 AND epoch = ?4 AND expires_at > clock_timestamp())
        RETURNING seq
        """
    static let keyHeadSQL: CachedSQL = "SELECT MAX(key_seq) FROM storebus_event WHERE stream_key = ?"
}
