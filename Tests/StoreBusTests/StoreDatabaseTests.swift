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
}
