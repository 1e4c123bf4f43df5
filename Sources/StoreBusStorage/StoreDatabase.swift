import Foundation
import GRDB
import StoreBus
import Synchronization

/// How durable commits are: SQLite's `synchronous` setting in WAL mode.
public enum Durability: String, Sendable, Codable {
    /// `synchronous=FULL`: a commit is on disk when the call returns, even across power loss.
    case full
    /// `synchronous=NORMAL`: a commit survives a crash of the process, not always a power loss.
    case normal

    var pragmaValue: String {
        switch self {
        case .full: "FULL"
        case .normal: "NORMAL"
        }
    }
}

/// A service's own SQLite database: one file in its data directory, WAL mode, opened through GRDB.
///
/// Only the owning service ever opens it; other services ask over the bus. Every change a service
/// makes is written with the events that describe it in one transaction (see ``EventLogWriter``).
public final class StoreDatabase: Sendable {
    /// The GRDB pool: one writer, concurrent readers (WAL).
    public let pool: DatabasePool
    /// The database file.
    public let path: String
    /// The writer's page cache, in KiB.
    static let writerCacheKiB = 32 * 1024

    /// Opens (creating if needed) `<directory>/<name>.sqlite` and runs `migrator`.
    ///
    /// The event log's tables are added to every database by ``EventLog/registerMigrations(_:)``,
    /// which the caller's migrator should include.
    public init(
        directory: URL, name: String, durability: Durability = .full, migrator: DatabaseMigrator,
        checkpointInterval: Duration = StoreDatabase.defaultCheckpointInterval
    ) throws {
        path = directory.appendingPathComponent("\(name).sqlite").path
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        pool = try DatabasePool(path: path, configuration: configuration)
        // Set on the writer after the pool is open: GRDB turns WAL mode on after `prepareDatabase`
        // and sets `synchronous = NORMAL` as it does, which would quietly undo a setting made there.
        // Only the writer's setting matters (readers never commit).
        //
        // `temp_store = MEMORY` keeps statement journals in memory: every write of a group commit
        // runs in a savepoint of its own (see ``EventLogWriter``), and SQLite saves each page a
        // savepoint touches first to that journal, which otherwise spills past 64 KiB to a temporary
        // file: more page writes than the WAL itself. A larger page cache spares the writer re-reading
        // index pages between commits.
        //
        // Checkpoints copy the WAL into the database file mostly on a thread of their own
        // (``Checkpointer``), beside the writer rather than inside its commits: they took a tenth of
        // the payment queue's commit thread, and the commit that crossed SQLite's threshold waited for
        // the copy and its fsync. Under steady writes a checkpoint beside the writer never catches up
        // with it entirely, and only a checkpoint that has copied every frame lets the next write start
        // the WAL over; so the writer still checkpoints by itself past ``writerCheckpointPages``, and
        // then finds all but the last few milliseconds of frames copied already.
        try pool.barrierWriteWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(durability.pragmaValue)")
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            try db.execute(sql: "PRAGMA cache_size = -\(Self.writerCacheKiB)")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.writerCheckpointPages)")
        }
        try migrator.migrate(pool)
        checkpointer = try Checkpointer(path: path, durability: durability, interval: checkpointInterval)
    }

    /// WAL pages past which the writer checkpoints after its commit, completing the copy so that the
    /// WAL starts over (SQLite's default is 1000): the WAL stays under about 16 MiB.
    static let writerCheckpointPages = 4096
    /// How often the checkpointer copies the WAL into the database file.
    public static let defaultCheckpointInterval = Duration.milliseconds(50)

    private let checkpointer: Checkpointer

    /// Frames in the WAL and frames already copied to the database file, as of the checkpointer's
    /// last pass (for tests and statistics).
    public var lastCheckpoint: (walFrames: Int, copied: Int) {
        checkpointer.last
    }

    /// The writer connection's `synchronous` setting as SQLite reports it (2 FULL, 1 NORMAL).
    public func synchronousSetting() throws -> Int {
        try pool.barrierWriteWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// A read-only connection of its own, for one thread that reads small pages synchronously (an RPC
    /// server's loop). In WAL mode it never waits for the writer, and a connection used by one thread
    /// only never waits for another: its reads run on the calling thread, without the pool's hops.
    public func makeReadOnlyConnection() throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(10)
        configuration.label = "storebus.reader"
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    deinit {
        checkpointer.stop()
    }

    /// Waits for running statements and closes every connection.
    public func close() throws {
        checkpointer.stop()
        try pool.close()
    }
}

/// Copies the WAL into the database file every interval (a passive checkpoint: it never waits for
/// the writer or readers, and the writer never waits for it), on a thread and connection of its own.
/// When it has copied every frame (the writes paused), the writer's next transaction starts the WAL
/// over; under steady writes the writer's own checkpoint does that (see ``StoreDatabase``).
final class Checkpointer: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `connection` is used in init, then only by the
    // checkpointer's thread (which closes it as it ends); `stopped`, `finished` and `latest` are
    // guarded by `condition`.
    private let connection: DatabaseQueue
    private let interval: Duration
    private let condition = NSCondition()
    private var stopped = false
    private var finished = false
    private var latest: (walFrames: Int, copied: Int) = (0, 0)

    init(path: String, durability: Durability, interval: Duration) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.label = "storebus.checkpointer"
        connection = try DatabaseQueue(path: path, configuration: configuration)
        // The checkpoint's fsyncs follow the writer's durability.
        try connection.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(durability.pragmaValue)") }
        self.interval = interval
        let thread = Thread { [self] in
            nameCurrentThread("storebus-ckpt")
            run()
        }
        thread.name = "storebus-ckpt"
        thread.start()
    }

    var last: (walFrames: Int, copied: Int) {
        condition.lock()
        defer { condition.unlock() }
        return latest
    }

    /// Ends the thread after its current pass and waits for it.
    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while !finished { condition.wait() }
        condition.unlock()
    }

    private func run() {
        // The connection's data_version as of a pass that copied every frame (thread-local).
        var copiedVersion: Int?
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        while true {
            condition.lock()
            if !stopped { _ = condition.wait(until: Date(timeIntervalSinceNow: seconds)) }
            let stop = stopped
            condition.unlock()
            if stop { break }
            // A failed pass (the database busy or gone) is tried again next interval; the writer's own
            // checkpoints are there meanwhile. With nothing committed since a pass that copied
            // everything, there is nothing to do (an idle service only reads a counter).
            let pass = try? connection.inDatabase { db -> (version: Int, row: Row?)? in
                let version = try Int.fetchOne(db, sql: "PRAGMA data_version") ?? 0
                if version == copiedVersion { return nil }
                return (version, try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(PASSIVE)"))
            }
            // Columns: busy (1 when another checkpoint held the lock), WAL frames, frames copied.
            if let pass = pass ?? nil, let row = pass.row, row[0] as Int? == 0,
               let frames = row[1] as Int?, let copied = row[2] as Int?, frames >= 0, copied >= 0 {
                copiedVersion = frames == copied ? pass.version : nil
                condition.lock()
                latest = (frames, copied)
                condition.unlock()
            }
        }
        try? connection.close()
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }
}

/// Reads a fetched row's columns by their exact names, through positions found once per column
/// layout.
///
/// GRDB finds a column of a fetched (copied) row by lower-casing and comparing every column name on
/// each access; a wide row read field by field paid that about twenty times over (3% of the payment
/// queue's commit thread). Building a table of positions for each row cost about as much again, so
/// the tables are kept, one per layout (the column names in order): rows of the same query share
/// one. Names not found here fall back to GRDB's own lookup.
public struct ColumnReader {
    /// The row.
    public let row: Row
    private let positions: [String: Int]

    /// A reader of `row`.
    public init(_ row: Row) {
        self.row = row
        positions = ColumnLayouts.shared.positions(of: row)
    }

    /// The value of the column `name` as it is stored (for statement arguments).
    @_disfavoredOverload
    public subscript(_ name: String) -> (any DatabaseValueConvertible)? {
        if let index = positions[name] { return row[index] }
        return row[name]
    }

    /// The value of the column `name` (an optional type reads NULL as nil).
    public subscript<Value: DatabaseValueConvertible>(_ name: String) -> Value {
        if let index = positions[name] { return row[index] }
        return row[name]
    }
}

/// The column positions of the row layouts met so far (a process reads rows of a few layouts only:
/// the tables' `SELECT *` and `RETURNING *`).
final class ColumnLayouts: Sendable {
    static let shared = ColumnLayouts()
    /// Layouts kept at most; past that, rows of a new layout get a table of their own each time.
    static let capacity = 32

    private struct Layout {
        let names: [String]
        let positions: [String: Int]
    }

    private let layouts = Mutex<[Layout]>([])

    func positions(of row: Row) -> [String: Int] {
        let names = Array(row.columnNames)
        // Compared name by name (short strings compare in a word or two); hashing the names to find
        // the layout would cost about what building its table does.
        if let known = layouts.withLock({ layouts in layouts.first { $0.names == names } }) {
            return known.positions
        }
        var positions: [String: Int] = [:]
        positions.reserveCapacity(names.count)
        for (index, name) in names.enumerated() where positions[name] == nil {
            positions[name] = index
        }
        layouts.withLock { layouts in
            if layouts.count < Self.capacity && !layouts.contains(where: { $0.names == names }) {
                layouts.append(Layout(names: names, positions: positions))
            }
        }
        return positions
    }
}
