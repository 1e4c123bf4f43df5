import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Event log writer: group commit")
struct GroupCommitTests {
    struct Refused: Error {}

    @Test("concurrent writes commit together; a write that throws rolls back alone and its caller hears why")
    func failingWriteRollsBackAlone() async throws {
        let directory = try TemporaryDirectory(prefix: "group")
        defer { directory.remove() }
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        migrator.registerMigration("note") { db in
            try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        }
        let database = try StoreDatabase(directory: directory.url, name: "group", migrator: migrator)
        let writer = EventLogWriter(logName: "group", database: database, publisher: nil)

        // 400 writers at once; every fifth writes its row and event, then throws.
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<400 {
                group.addTask {
                    do {
                        _ = try await writer.write { db, batch in
                            try db.execute(sql: "INSERT INTO note (id, text) VALUES (?, ?)", arguments: [index, "note \(index)"])
                            try batch.append(key: "k\(index % 7)", Storebus_Testkit_V1_AppendRequest.with { $0.key = "k"; $0.text = "\(index)" })
                            if index % 5 == 0 { throw Refused() }
                            return index
                        }
                        return (index, true)
                    } catch is Refused {
                        return (index, false)
                    } catch {
                        Issue.record("unexpected \(error)")
                        return (index, false)
                    }
                }
            }
            var all: [Int: Bool] = [:]
            for await (index, ok) in group { all[index] = ok }
            return all
        }
        #expect(outcomes.count == 400)
        #expect(outcomes.values.filter { $0 }.count == 320)

        try await database.pool.read { db in
            let notes = try Int.fetchAll(db, sql: "SELECT id FROM note ORDER BY id")
            #expect(notes == (0..<400).filter { $0 % 5 != 0 })
            // The log has exactly the committed writes' events, gapless, per key too.
            let seqs = try UInt64.fetchAll(db, sql: "SELECT seq FROM storebus_event ORDER BY seq")
            #expect(seqs == Array(1...320))
            for key in 0..<7 {
                let keySeqs = try UInt64.fetchAll(db, sql: "SELECT key_seq FROM storebus_event WHERE stream_key = ? ORDER BY key_seq", arguments: ["k\(key)"])
                #expect(keySeqs == Array(1...UInt64(keySeqs.count)))
            }
        }
        try database.close()
    }
}
