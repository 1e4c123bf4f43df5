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

    @Test("ColumnReader reads a fetched row's columns by exact name, NULL as nil, the leftmost of a repeated name, and others through GRDB")
    func columnReader() throws {
        let queue = try DatabaseQueue()
        let row = try queue.read { db in
            try Row.fetchOne(db, sql: "SELECT 1 AS id, 'gems' AS product_id, NULL AS error_code, X'0102' AS request_data, 7 AS id, 'x' AS Mixed_Case")!
        }
        let columns = ColumnReader(row)
        #expect(columns["id"] as Int == 1, "the leftmost, as GRDB reads it")
        #expect(columns["product_id"] as String == "gems")
        #expect(columns["error_code"] as Int? == nil)
        #expect(columns["request_data"] as Data == Data([1, 2]))
        #expect(columns["mixed_case"] as String? == "x", "a name it does not hold as spelled: GRDB's case-insensitive lookup")
        #expect(columns["missing"] as String? == nil)
    }

    @Test("rows of different column layouts, read in turn, each find their own columns")
    func columnLayouts() throws {
        let queue = try DatabaseQueue()
        let (first, second, third) = try queue.read { db in
            (try Row.fetchOne(db, sql: "SELECT 1 AS a, 2 AS b, 3 AS c")!,
             try Row.fetchOne(db, sql: "SELECT 30 AS c, 20 AS b, 10 AS a")!,
             try Row.fetchOne(db, sql: "SELECT 100 AS a, 200 AS b")!)
        }
        for _ in 0..<3 {
            for (row, expected) in [(first, [1, 2, 3]), (second, [10, 20, 30]), (third, [100, 200])] {
                let columns = ColumnReader(row)
                #expect(["a", "b", "c"].prefix(expected.count).map { columns[$0] as Int } == expected)
            }
        }
        #expect(ColumnReader(third)["c"] as Int? == nil)
    }
}
