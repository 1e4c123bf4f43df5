import Foundation
import GRDB
import StoreBusStorage
import StoreBusTesting
import Testing

@Suite("StoreDatabase")
struct StoreDatabaseTests {
    @Test("the writer commits with the durability asked for, although GRDB's pool sets NORMAL when it enters WAL mode")
    func durabilityReachesTheWriter() throws {
        let directory = try TemporaryDirectory(prefix: "durability")
        defer { directory.remove() }
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        for (durability, expected) in [(Durability.full, 2), (.normal, 1), (.full, 2)] {
            let database = try StoreDatabase(directory: directory.url, name: "durable", durability: durability, migrator: migrator)
            try database.pool.write { db in
                _ = try EventLog.appendJSON(db, key: "k", type: "t", payloadJSON: "{}")
            }
            #expect(try database.synchronousSetting() == expected, "durability \(durability)")
            #expect(try database.pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") } == "wal")
            try database.close()
        }
    }

    @Test("checkpoints run beside the writer: thousands of commits through the event log writer keep the WAL near the restart threshold, and it is all copied once writes pause")
    func backgroundCheckpoints() async throws {
        let directory = try TemporaryDirectory(prefix: "checkpoint")
        defer { directory.remove() }
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        let database = try StoreDatabase(directory: directory.url, name: "busy", migrator: migrator, checkpointInterval: .milliseconds(20))
        let threshold = try await database.pool.write { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") }
        #expect(threshold == 16384, "SQLite's own checkpoint after a commit is only the safety net")
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
        // About 2000 x 3 pages: without a restart the WAL would hold them all (24 MB) before SQLite's
        // own checkpoint at 16384 pages; the writer copies the checkpointer's tail and starts it over.
        #expect(largestWAL < 4096 * 4096, "WAL grew to \(largestWAL) bytes")
        // Once the writes stop, the checkpointer copies the rest.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let last = database.lastCheckpoint
            if last.walFrames > 0 && last.walFrames == last.copied { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let last = database.lastCheckpoint
        #expect(last.walFrames > 0 && last.walFrames == last.copied, "every frame copied: \(last)")
        let count = try await database.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM storebus_event") }
        #expect(count == 2000)
        try database.close()
    }
}
