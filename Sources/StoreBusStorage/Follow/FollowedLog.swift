import GRDB
import StoreBus

/// Another service's event log as its follower keeps track of it: the position applied, in the
/// follower's own database (table `sb_follow`), written in the same transaction as the page's effects,
/// so that a restart at any moment applies each event exactly once. A follower's database is derived
/// state: when the log is replaced, its effects are forgotten and it is applied again from the start.
public struct FollowedLog: Sendable {
    /// The log's name (``ServiceEntry/log``).
    public let name: String
    let database: any SQLDatabase

    /// The log `name`, its position kept in `database` (which registered ``registerMigration(_:replacing:)``).
    public init(name: String, database: any SQLDatabase) {
        self.name = name
        self.database = database
    }

    /// Registers the position table with a follower's migrations. `legacyTable`, a follower's own
    /// position table of the same shape from before this one, has its rows moved here and is dropped.
    public static func registerMigration(_ migrator: inout DatabaseMigrator, replacing legacyTable: String? = nil) {
        migrator.registerMigration("sb_follow_v1") { db in
            try db.execute(sql: "CREATE TABLE sb_follow (log TEXT PRIMARY KEY, seq INTEGER NOT NULL) STRICT")
            if let legacyTable {
                try db.execute(sql: "INSERT INTO sb_follow (log, seq) SELECT log, seq FROM \(legacyTable)")
                try db.execute(sql: "DROP TABLE \(legacyTable)")
            }
        }
    }

    /// Shard `shard` of a sharded log, as a log of its own: its position kept under the log's name
    /// and `#<shard>` (shard 0 under the name alone, as the one log of a log that is not sharded).
    public func shard(_ shard: UInt32) -> FollowedLog {
        FollowedLog(name: Self.name(name, shard: shard), database: database)
    }

    /// The name a shard of log `log` is kept under (``shard(_:)``).
    public static func name(_ log: String, shard: UInt32) -> String {
        shard == 0 ? log : "\(log)#\(shard)"
    }

    /// The position of the last event applied (0: none).
    public func position() async throws -> UInt64 {
        try await database.read { db in try Self.position(db, name) }
    }

    /// The position in an open transaction.
    static func position(_ db: any SQLConnection, _ name: String) throws -> UInt64 {
        UInt64(try db.value(Int64.self, cached: positionSQL, arguments: [name]) ?? 0)
    }

    static let positionSQL: CachedSQL = "SELECT seq FROM sb_follow WHERE log = ?"

    /// Runs `effects` and moves the position from `stored` to `seq`, in one write transaction,
    /// durable before it returns, on condition that the position stored is still `stored`: when
    /// another instance of the follower moved it meanwhile (the shard went to it, and came back),
    /// nothing is applied and ``Moved`` is thrown, so that each event is applied once however many
    /// instances follow the log. `effects` may do nothing: the position alone moves (for the other
    /// instances, whose callers wait for it: see ``LogFollowerService``). `derived`: the effects are
    /// state the log gives again (nothing else depends on them having been made): the commit does
    /// not wait for the disk (``StoreDatabase/writeDerived(_:)``), and a power loss that takes it
    /// back takes the position back with it.
    public func apply(after stored: UInt64, through seq: UInt64, derived: Bool = false, _ effects: @Sendable @escaping (any SQLConnection) throws -> Void) async throws {
        let name = name
        let write: @Sendable (any SQLConnection) throws -> Void = { db in
            try db.execute(cached: Self.movePositionSQL, arguments: [Int64(seq), name, Int64(stored)])
            if db.changesCount == 0 {
                // The first position of this log: no row yet, unless another instance made it.
                guard stored == 0 else { throw Moved(log: name) }
                try db.execute(cached: Self.firstPositionSQL, arguments: [name, Int64(seq)])
                guard db.changesCount == 1 else { throw Moved(log: name) }
            }
            try effects(db)
        }
        if derived {
            try await database.writeDerived(write)
        } else {
            try await database.write(write)
        }
    }

    /// Thrown by ``apply(after:through:derived:_:)``: the position stored is not the one the follower
    /// started from; nothing was applied.
    public struct Moved: Error, CustomStringConvertible {
        public let log: String
        public var description: String { "the position of \(log) was moved by another instance of this follower" }
    }

    static let movePositionSQL: CachedSQL = "UPDATE sb_follow SET seq = ? WHERE log = ? AND seq = ?"
    static let firstPositionSQL: CachedSQL = "INSERT INTO sb_follow (log, seq) VALUES (?, ?) ON CONFLICT (log) DO NOTHING"

    /// Every position stored, by name: what the other instances of a follower have applied.
    public func positions() async throws -> [String: UInt64] {
        try await database.read { db in
            var positions: [String: UInt64] = [:]
            try db.forEachRow(cached: "SELECT log, seq FROM sb_follow") { positions[$0.text(0)] = UInt64($0.int64(1)) }
            return positions
        }
    }

    /// Runs `effects` (removing what the log gave) and puts the position back to 0, in one write
    /// transaction: the log was replaced, and is applied again from its start.
    public func forget(_ effects: @Sendable @escaping (any SQLConnection) throws -> Void) async throws {
        let name = name
        try await database.write { db in
            try effects(db)
            try db.execute(cached: "DELETE FROM sb_follow WHERE log = ?", arguments: [name])
        }
    }
}
