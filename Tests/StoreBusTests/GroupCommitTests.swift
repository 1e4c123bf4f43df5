import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing
import ZeroMQ

@Suite("Event log writer: group commit")
struct GroupCommitTests {
    struct Refused: Error {}

    /// A writer committing on its own thread, or on a reactor's loop (with the reactor to stop after).
    static func writer(_ database: StoreDatabase, onLoop: Bool) throws -> (EventLogWriter, Reactor?, ZeroMQ.Context?) {
        guard onLoop else { return (EventLogWriter(logName: "group", database: database, publisher: nil), nil, nil) }
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "group", context: context)
        reactor.start()
        return (EventLogWriter(logName: "group", database: database, publisher: nil, reactor: reactor), reactor, context)
    }

    static func migrator() -> DatabaseMigrator {
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        migrator.registerMigration("note") { db in
            try db.execute(cached: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
            // Checked at commit: a row naming a missing note fails the whole group's transaction.
            try db.execute(cached: "CREATE TABLE mention (note INTEGER NOT NULL REFERENCES note(id) DEFERRABLE INITIALLY DEFERRED)")
        }
        return migrator
    }

    /// Every event's positions, in log order.
    static func positions(_ database: StoreDatabase) async throws -> [(seq: UInt64, key: String, keySeq: UInt64)] {
        try await database.pool.read { db in
            try db.rows(cached: CachedSQL("SELECT seq, stream_key, key_seq FROM storebus_event ORDER BY seq")).map { ($0[0], $0[1], $0[2]) }
        }
    }

    @Test("positions stay gapless when a group's commit fails: the appends it undid are taken again", arguments: [false, true])
    func failedGroupFreesPositions(onLoop: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "group")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "group", migrator: Self.migrator())
        let (writer, reactor, context) = try Self.writer(database, onLoop: onLoop)
        let note = Storebus_Testkit_V1_AppendRequest.with {
            $0.key = "k"; $0.text = "note"
        }
        _ = try await writer.write { _, batch in try batch.append(key: "a", note) }
        // Its own writes pass; the commit refuses the row that names no note, and the whole group
        // goes with it.
        await #expect(throws: DatabaseError.self) {
            try await writer.write { db, batch in
                try batch.append(key: "a", note)
                try batch.append(key: "b", note)
                try db.execute(cached: "INSERT INTO mention (note) VALUES (42)")
            }
        }
        try await writer.write { _, batch in
            try batch.append(key: "b", note)
            try batch.append(key: "a", note)
        }
        let positions = try await Self.positions(database)
        #expect(positions.map(\.seq) == [1, 2, 3])
        #expect(positions.map(\.key) == ["a", "b", "a"])
        #expect(positions.map(\.keySeq) == [1, 1, 2])
        reactor?.stop()
        await reactor?.join()
        context?.terminate()
        try database.close()
    }

    @Test("positions stay right past the keys the writer remembers: a key it forgot is read again")
    func manyKeys() async throws {
        let directory = try TemporaryDirectory(prefix: "group")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "group", migrator: Self.migrator())
        let writer = EventLogWriter(logName: "group", database: database, publisher: nil)
        let note = Storebus_Testkit_V1_AppendRequest.with {
            $0.key = "k"; $0.text = "note"
        }
        let keys = 5000
        try await writer.write { _, batch in
            for key in 0..<keys { try batch.append(key: "k\(key)", note) }
        }
        try await writer.write { _, batch in
            for key in [0, 4095, 4096, keys - 1, 0] { try batch.append(key: "k\(key)", note) }
        }
        let positions = try await Self.positions(database)
        #expect(positions.map(\.seq) == Array(1...UInt64(keys + 5)))
        #expect(positions.suffix(5).map(\.key) == ["k0", "k4095", "k4096", "k4999", "k0"])
        #expect(positions.suffix(5).map(\.keySeq) == [2, 2, 2, 2, 3])
        try database.close()
    }

    @Test("concurrent writes commit together; a write that throws rolls back alone and its caller hears why", arguments: [false, true], [false, true])
    func failingWriteRollsBackAlone(onLoop: Bool, syncThread: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "group")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "group", syncThread: syncThread, migrator: Self.migrator())
        let (writer, reactor, context) = try Self.writer(database, onLoop: onLoop)

        // 400 writers at once; every fifth writes its row and event, then throws.
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for index in 0..<400 {
                group.addTask {
                    do {
                        _ = try await writer.write { db, batch in
                            try db.execute(cached: "INSERT INTO note (id, text) VALUES (?, ?)", arguments: [index, "note \(index)"])
                            try batch.append(
                                key: "k\(index % 7)",
                                Storebus_Testkit_V1_AppendRequest.with {
                                    $0.key = "k"; $0.text = "\(index)"
                                })
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
        // Every write answered is durable (with the writer syncing its own commits, all are).
        #expect(database.durableEventSeq == (syncThread ? 320 : UInt64.max))

        try await database.pool.read { db in
            let notes = try db.values(Int.self, cached: CachedSQL("SELECT id FROM note ORDER BY id"))
            #expect(notes == (0..<400).filter { $0 % 5 != 0 })
            // The log has exactly the committed writes' events, gapless, per key too.
            let seqs = try db.values(UInt64.self, cached: CachedSQL("SELECT seq FROM storebus_event ORDER BY seq"))
            #expect(seqs == Array(1...320))
            for key in 0..<7 {
                let keySeqs = try db.values(UInt64.self, cached: CachedSQL("SELECT key_seq FROM storebus_event WHERE stream_key = ? ORDER BY key_seq"), arguments: ["k\(key)"])
                #expect(keySeqs == Array(1...UInt64(keySeqs.count)))
            }
        }
        reactor?.stop()
        await reactor?.join()
        context?.terminate()
        try database.close()
    }

    @Test("on a reactor's loop: a write made there commits with no other thread; once the reactor stops, a write is cancelled instead of waiting forever", .timeLimit(.minutes(1)))
    func loopCommitterAroundStop() async throws {
        let directory = try TemporaryDirectory(prefix: "group")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "group", migrator: Self.migrator())
        let context = try ZeroMQ.Context()
        let reactor = Reactor(name: "group", context: context)
        reactor.start()
        let writer = EventLogWriter(logName: "group", database: database, publisher: nil, reactor: reactor)
        // A task of the loop, as a request's handler is: its write commits and its caller resumes there.
        let committedOnLoop = try await Task(executorPreference: ReactorExecutor(reactor: reactor)) {
            try await writer.write { db, batch in
                try db.execute(cached: "INSERT INTO note (id, text) VALUES (1, 'on the loop')")
                try batch.append(
                    key: "k",
                    Storebus_Testkit_V1_AppendRequest.with {
                        $0.key = "k"; $0.text = "1"
                    })
                return reactor.isInLoop
            }
        }.value
        #expect(committedOnLoop)
        reactor.stop()
        await reactor.join()
        await #expect(throws: CancellationError.self) {
            try await writer.write { db, _ in try db.execute(cached: "INSERT INTO note (id, text) VALUES (2, 'too late')") }
        }
        let notes = try await database.pool.read { db in try db.values(Int.self, cached: CachedSQL("SELECT id FROM note")) }
        #expect(notes == [1])
        context.terminate()
        try database.close()
    }
}
