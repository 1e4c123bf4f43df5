import Foundation
import GRDB
import StoreBus
import StoreBusServer
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
public final class StoreDatabase: SQLDatabase {
    /// The GRDB pool: one writer, concurrent readers (WAL).
    public let pool: DatabasePool
    /// The database file.
    public let path: String
    /// The writer's page cache, in KiB.
    static let writerCacheKiB = 32 * 1024
    /// The page size of a new database file. A commit writes each page it changed to the WAL whole,
    /// and most pages a purchase changes are index leaves where it adds or moves one short entry:
    /// with 2 KiB pages rather than SQLite's 4 KiB, each of them costs half the bytes to checksum,
    /// copy, write, sync and checkpoint. In the payment queue's profile (scripts/callgrind-flow),
    /// checksumming and copying WAL frames took about 30K fewer instructions per purchase flow, of
    /// some 900K.
    static let pageSize = 2048

    /// Opens (creating if needed) `<directory>/<name>.sqlite` and runs `migrator`.
    ///
    /// The event log's tables are added to every database by ``EventLog/registerMigrations(_:)``,
    /// which the caller's migrator should include.
    ///
    /// With `syncThread` and ``Durability/full``, the writer's commits are made durable by a thread
    /// of its own rather than inside each commit (see ``WALSyncer``): the writer goes on committing
    /// while the disk syncs. Commits are then as durable as `FULL` makes them only to those who wait
    /// for them as this type does: write through ``EventLogWriter`` or ``write(_:)``, read through
    /// ``read(_:)`` (or leave out events past ``durableEventSeq``), never through `pool` directly.
    public init(
        directory: URL, name: String, durability: Durability = .full, syncThread: Bool = false, migrator: DatabaseMigrator,
        checkpointInterval: Duration = StoreDatabase.defaultCheckpointInterval,
        restartPages: Int = StoreDatabase.defaultRestartPages
    ) throws {
        _ = SQLiteSettings.applied
        path = directory.appendingPathComponent("\(name).sqlite").path
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        // Applies to a file this creates only: an existing database keeps the page size it has.
        configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)") }
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
        // Checkpoints copy the WAL into the database file on a thread of their own (``Checkpointer``),
        // beside the writer rather than inside its commits: they took a tenth of the payment queue's
        // commit thread. Under steady writes that copy never catches up with the writer entirely, and
        // the WAL starts over only at a commit whose transaction began with every frame copied. So
        // once the WAL passes `restartPages`, the checkpointer runs passes until one leaves only a
        // short tail, then asks the writer to copy that tail between two of its transactions
        // (``completeRequestedCheckpoint()``). SQLite's own checkpoint after a commit, past
        // ``writerCheckpointPages``, is the safety net for writers that never ask.
        self.durability = durability
        let syncs = syncThread && durability == .full
        try pool.barrierWriteWithoutTransaction { db in
            // With a sync thread, the writer's commits no longer sync (the thread does; checkpoints,
            // on the checkpointer's connection, still sync as `durability` says).
            try db.execute(sql: "PRAGMA synchronous = \(syncs ? Durability.normal.pragmaValue : durability.pragmaValue)")
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            try db.execute(sql: "PRAGMA cache_size = -\(Self.writerCacheKiB)")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.writerCheckpointPages)")
        }
        try migrator.migrate(pool)
        let lastEvent = try syncs ? pool.read { db in try db.tableExists("storebus_event") ? EventLog.head(db, key: "") : 0 } : 0
        // Threads last: once they run, nothing may throw (they would outlive an initializer that
        // failed).
        checkpointer = try Checkpointer(path: path, durability: durability, interval: checkpointInterval, restartPages: restartPages)
        syncer = syncs ? WALSyncer(databasePath: path, durableSeq: lastEvent) : nil
    }

    /// The thread that syncs the writer's commits, when it does not sync them itself.
    public let syncer: WALSyncer?
    /// How durable the writer's commits are.
    public let durability: Durability

    /// The last event position of the log that is durable: readers that cannot wait for a sync
    /// (``EventLogHandlers``'s pages) leave out the events after it. Every event committed, when the
    /// writer syncs its own commits.
    public var durableEventSeq: UInt64 {
        syncer?.durableSeq ?? UInt64.max
    }

    /// Reads in the pool; with a sync thread, returns once everything the read could have seen is
    /// durable (at once when nothing was written since the last sync).
    /// An error the read throws waits as well: it may tell of what the read saw (an idempotency key
    /// already used, for instance).
    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await pool.read(body))
        } catch {
            outcome = .failure(error)
        }
        if let syncer { await syncer.durableNow() }
        return try outcome.get()
    }

    /// Reads in the pool at once, without waiting for a sync.
    public func readCommitted<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await pool.read(body)
    }

    /// Writes in a transaction of its own (outside ``EventLogWriter``'s groups: for writes with no
    /// events, such as settings) and returns once it is durable.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        guard let syncer else { return try await pool.write(body) }
        let mark = syncer.begin()
        let value: T
        do {
            value = try await pool.write(body)
        } catch {
            syncer.end(mark, lastSeq: nil, then: nil)
            throw error
        }
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            syncer.end(mark, lastSeq: nil) { continuation.resume() }
        }
        return value
    }

    /// Writes state derived from another service's log, in a transaction that also stores the log
    /// position it came from (``FollowedLog``), without waiting for the disk: the commit survives a
    /// crash of the process but a power loss may take it back, and with it the position, so the
    /// follower reads those events again and ends where it would have. Later commits that do sync
    /// (SQLite's WAL is written in order) make it durable with them: a power loss only ever takes
    /// back the newest such commits, never one before a synced one. With ``Durability/normal``, or
    /// a sync thread (whose writes never sync in the commit), the same as ``write(_:)``.
    public func writeDerived<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        guard syncer == nil, durability == .full else { return try await write(body) }
        return try await pool.writeWithoutTransaction { db in
            // SQLite refuses to change the setting inside a transaction: around it, then.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            defer { try? db.execute(sql: "PRAGMA synchronous = FULL") }
            var value: T?
            try db.inTransaction {
                value = try body(db)
                return .commit
            }
            return value!
        }
    }

    public var engine: SQLEngine { .sqlite }

    /// The transaction GRDB's `write` would open (IMMEDIATE), with its BEGIN and COMMIT prepared
    /// once: `write` prepares both anew for every transaction, about 7K instructions each, a group at
    /// a time (one or two a purchase at low rates).
    public func inGroupTransaction<T>(_ body: (any SQLConnection) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db -> T in
            try db.execute(cached: Self.beginGroup)
            do {
                let value = try body(db)
                try db.execute(cached: Self.commitGroup)
                return value
            } catch {
                // Undone whole, as `write` undoes it: a failed COMMIT (a deferred foreign key)
                // leaves the transaction open, and an I/O error may have ended it already
                // (GRDB's rollback then does nothing).
                try? db.rollback()
                throw error
            }
        }
    }

    static let beginGroup: CachedSQL = "BEGIN IMMEDIATE TRANSACTION"
    static let commitGroup: CachedSQL = "COMMIT TRANSACTION"

    /// Between two groups: the moment to let the WAL start over (see ``completeRequestedCheckpoint()``).
    public func betweenGroups() {
        completeRequestedCheckpoint()
    }

    /// WAL pages past which the checkpointer asks the writer to complete the copy, so that the WAL
    /// starts over (32 MiB of 2 KiB pages). The writer's copy ends with two syncs, the WAL's and the
    /// database file's, and its loop waits for them: under the flow benchmark at 900 flows a second
    /// the database file's took 0.3 to 12 ms, and with 2,048 pages the copy came three to five times
    /// a second, each time with every call in flight caught behind it (the loop's syncs added up to
    /// 75 to 136 ms in 8 s; with 16,384 pages, 18 to 27 ms).
    public static let defaultRestartPages = 16384
    /// WAL pages past which a commit checkpoints by itself (SQLite's `wal_autocheckpoint`; its
    /// default is 1000), for writers that never call ``completeRequestedCheckpoint()`` or that write
    /// faster than the copies keep up with: the WAL stays under about 64 MiB (128 MiB in a database
    /// of 4 KiB pages) whatever they do. That commit waits for a copy of every frame not yet copied
    /// (measured in the payment queue: 4 to 8 ms, every flow in flight caught behind it), where a
    /// requested copy finds a tail of a few milliseconds.
    static let writerCheckpointPages = 32768
    /// How often the checkpointer copies the WAL into the database file. Each pass copies every page
    /// written since the last, once, however often it was written meanwhile, so fewer passes copy
    /// fewer pages: measured in the payment queue at 2,000 flows a second, passes every 50 ms held
    /// the paced p99 at 24 to 29 ms, every 100 or 150 ms at 18 to 26 ms (and the closed loop ran
    /// about 10% faster).
    public static let defaultCheckpointInterval = Duration.milliseconds(100)

    private let checkpointer: Checkpointer

    /// On the writer's thread, between two write transactions: copies the tail of the WAL the
    /// checkpointer asked for, if it did (see ``defaultRestartPages``). The writer adds no frames meanwhile,
    /// so the copy ends with every frame copied unless a reader still needs one, and the next commit
    /// starts the WAL over. When nothing was asked it costs an atomic load. A copy that fails (a
    /// reader in the way) is left to the next request.
    public func completeRequestedCheckpoint() {
        guard checkpointer.takeRequest() else { return }
        _ = try? pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(PASSIVE)") }
    }

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
        syncer?.stop()
    }

    /// Syncs what was written, waits for running statements and closes every connection.
    public func close() throws {
        checkpointer.stop()
        syncer?.stop()
        try pool.close()
    }
}

/// Copies the WAL into the database file every interval (a passive checkpoint: it never waits for
/// the writer or readers, and the writer never waits for it), on a thread and connection of its own.
/// When it has copied every frame (the writes paused), the writer's next transaction starts the WAL
/// over; under steady writes it asks the writer to copy the last few frames (see ``StoreDatabase``).
final class Checkpointer: @unchecked Sendable {
    // Invariant for @unchecked Sendable: `connection` is used in init, then only by the
    // checkpointer's thread (which closes it as it ends); `stopped`, `finished` and `latest` are
    // guarded by `condition`; `requested` is atomic.
    private let connection: DatabaseQueue
    private let interval: Duration
    /// WAL pages past which the writer is asked to complete the copy.
    private let restartPages: Int
    private let requested = Atomic<Bool>(false)
    private let condition = NSCondition()
    private var stopped = false
    private var finished = false
    private var latest: (walFrames: Int, copied: Int) = (0, 0)

    init(path: String, durability: Durability, interval: Duration, restartPages: Int) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.label = "storebus.checkpointer"
        connection = try DatabaseQueue(path: path, configuration: configuration)
        // The checkpoint's fsyncs follow the writer's durability.
        try connection.inDatabase { db in try db.execute(sql: "PRAGMA synchronous = \(durability.pragmaValue)") }
        self.interval = interval
        self.restartPages = restartPages
        let thread = Thread { [self] in
            nameCurrentThread("storebus-ckpt")
            run()
        }
        thread.name = "storebus-ckpt"
        thread.start()
    }

    /// Frames few enough for the writer to copy between two transactions without a noticeable pause
    /// (a pass that copied no more took about a millisecond).
    static let shortTail = 128
    /// Passes run in a row at most before the writer is asked anyway.
    static let maxHurried = 4

    /// Whether a pass asked the writer to complete the copy since the last call (the request is
    /// taken: another comes only after another pass).
    func takeRequest() -> Bool {
        requested.load(ordering: .relaxed) && requested.exchange(false, ordering: .acquiringAndReleasing)
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
        // The WAL frames copied as of the last pass, and the passes run at once in a row (thread-local).
        var lastCopied = 0
        var hurried = 0
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        while true {
            condition.lock()
            if !stopped && hurried == 0 { _ = condition.wait(until: Date(timeIntervalSinceNow: seconds)) }
            let stop = stopped
            condition.unlock()
            if stop { break }
            // Only a pass that succeeds runs the next at once (a failing one waits an interval).
            let inRow = hurried
            hurried = 0
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
                let frames = row[1] as Int?, let copied = row[2] as Int?, frames >= 0, copied >= 0
            {
                copiedVersion = frames == copied ? pass.version : nil
                // Past the threshold, passes follow one another at once until one copies only a short
                // tail: it was short itself, so the frames it left behind are few. The writer is then
                // asked to copy those.
                let fresh = copied >= lastCopied ? copied - lastCopied : copied
                if frames >= restartPages && fresh > Self.shortTail && inRow < Self.maxHurried {
                    hurried = inRow + 1
                } else if frames >= restartPages {
                    requested.store(true, ordering: .releasing)
                }
                lastCopied = copied
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
