import Foundation
import GRDB
import StoreBusStorage
import StoreBusTesting
import Testing

@Suite("StoreDatabase")
struct StoreDatabaseTests {
    /// The migrations of a database holding only the event log.
    static var eventLogMigrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        return migrator
    }

    @Test("the writer commits with the durability asked for, although GRDB's pool sets NORMAL when it enters WAL mode")
    func durabilityReachesTheWriter() throws {
        let directory = try TemporaryDirectory(prefix: "durability")
        defer { directory.remove() }
        let migrator = Self.eventLogMigrator
        for (durability, expected) in [(Durability.full, 2), (.normal, 1), (.full, 2)] {
            let database = try StoreDatabase(directory: directory.url, name: "durable", durability: durability, migrator: migrator)
            try database.pool.write { db in
                _ = try EventLog.appendJSON(db, key: "k", type: "t", payloadJSON: "{}")
            }
            #expect(try database.synchronousSetting() == expected, "durability \(durability)")
            #expect(try database.pool.read { db in try db.value(String.self, cached: CachedSQL("PRAGMA journal_mode")) } == "wal")
            try database.close()
        }
    }

    @Test("a derived write commits with NORMAL and leaves the writer at FULL; a failed one too; with durability normal nothing changes")
    func derivedWrites() async throws {
        let directory = try TemporaryDirectory(prefix: "derived")
        defer { directory.remove() }
        for (durability, inside, after) in [(Durability.full, 1, 2), (.normal, 1, 1)] {
            let database = try StoreDatabase(directory: directory.url, name: "derived-\(durability)", durability: durability, migrator: Self.eventLogMigrator)
            let seen = try await database.writeDerived { db in
                _ = try EventLog.appendJSON(db, key: "k", type: "t", payloadJSON: "{}")
                return try db.value(Int.self, cached: CachedSQL("PRAGMA synchronous"))
            }
            #expect(seen == inside, "durability \(durability): inside the derived write")
            #expect(try database.synchronousSetting() == after, "durability \(durability): after it")
            await #expect(throws: (any Error).self) {
                try await database.writeDerived { db in
                    _ = try EventLog.appendJSON(db, key: "k", type: "t", payloadJSON: "{}")
                    throw CancellationError()
                }
            }
            #expect(try database.synchronousSetting() == after, "durability \(durability): after a failed one")
            #expect(try await database.read { db in try EventLog.head(db, key: "k") } == 1, "the failed one rolled back")
            try database.close()
        }
    }

    @Test("a new database file has 2 KiB pages; one made before with SQLite's default keeps its own and its data")
    func pageSize() throws {
        let directory = try TemporaryDirectory(prefix: "pages")
        defer { directory.remove() }
        let migrator = Self.eventLogMigrator
        let database = try StoreDatabase(directory: directory.url, name: "new", migrator: migrator)
        #expect(try database.pool.read { db in try db.value(Int.self, cached: CachedSQL("PRAGMA page_size")) } == 2048)
        try database.close()

        let older = directory.url.appendingPathComponent("older.sqlite").path
        let queue = try DatabaseQueue(path: older)
        try queue.write { db in
            try db.execute(cached: "PRAGMA journal_mode = WAL")
            try db.execute(cached: "CREATE TABLE kept (value TEXT)")
            try db.execute(cached: "INSERT INTO kept VALUES ('before')")
        }
        #expect(try queue.read { db in try db.value(Int.self, cached: CachedSQL("PRAGMA page_size")) } == 4096)
        try queue.close()
        let reopened = try StoreDatabase(directory: directory.url, name: "older", migrator: migrator)
        try reopened.pool.write { db in
            _ = try EventLog.appendJSON(db, key: "k", type: "t", payloadJSON: "{}")
        }
        #expect(try reopened.pool.read { db in try db.value(Int.self, cached: CachedSQL("PRAGMA page_size")) } == 4096)
        #expect(try reopened.pool.read { db in try db.values(String.self, cached: CachedSQL("SELECT value FROM kept")) } == ["before"])
        try reopened.close()
    }

    @Test("checkpoints run beside the writer: thousands of commits through the event log writer keep the WAL near the restart threshold, and it is all copied once writes pause")
    func backgroundCheckpoints() async throws {
        let directory = try TemporaryDirectory(prefix: "checkpoint")
        defer { directory.remove() }
        let migrator = Self.eventLogMigrator
        // A restart threshold smaller than the default (16,384 pages), so that a test's writes pass it.
        let database = try StoreDatabase(directory: directory.url, name: "busy", migrator: migrator, checkpointInterval: .milliseconds(20), restartPages: 2048)
        let threshold = try await database.pool.write { db in try db.value(Int.self, cached: CachedSQL("PRAGMA wal_autocheckpoint")) }
        #expect(threshold == 32768, "SQLite's own checkpoint after a commit is only the safety net")
        let writer = EventLogWriter(logName: "busy", database: database, publisher: nil)
        let payload = "\"" + String(repeating: "x", count: 3000) + "\""
        var largestWAL = 0
        for index in 0..<2000 {
            try await writer.write { db, _ in
                _ = try EventLog.appendJSON(db, key: "k\(index % 7)", type: "t", payloadJSON: payload)
            }
            if index % 100 == 0 {
                let attributes = try? FileManager.default.attributesOfItem(atPath: database.path + "-wal")
                largestWAL = max(largestWAL, (attributes?[.size] as? Int) ?? 0)
                try await Task.sleep(for: .milliseconds(1))
            }
        }
        // Each commit adds about 10 KB of frames (the 3 KB row over two pages, and the pages it
        // changes): without a restart the WAL would hold them all (about 20 MB) before SQLite's own
        // checkpoint at 32,768 pages; the writer copies the checkpointer's tail and starts it over
        // near 2,048 pages (4 MB).
        #expect(largestWAL < 8 << 20, "WAL grew to \(largestWAL) bytes")
        // Once the writes stop, the checkpointer copies the rest.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let last = database.lastCheckpoint
            if last.walFrames > 0 && last.walFrames == last.copied { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let last = database.lastCheckpoint
        #expect(last.walFrames > 0 && last.walFrames == last.copied, "every frame copied: \(last)")
        let count = try await database.pool.read { db in try db.value(Int.self, cached: CachedSQL("SELECT COUNT(*) FROM storebus_event")) }
        #expect(count == 2000)
        try database.close()
    }
}
