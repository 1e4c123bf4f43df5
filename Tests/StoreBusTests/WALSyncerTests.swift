import Foundation
import GRDB
import StoreBus
@testable import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

@Suite("WAL sync thread")
struct WALSyncerTests {
    /// Set once, read by the test.
    final class Done: Sendable {
        private let done = Atomic<Bool>(false)
        var isSet: Bool { done.load(ordering: .acquiring) }
        func set() { done.store(true, ordering: .releasing) }
    }

    static func note(_ text: String) -> Storebus_Testkit_V1_AppendRequest {
        .with { $0.key = "k"; $0.text = text }
    }

    @Test("with a sync thread, a commit is not answered, its events are not served and reads that could see it do not return until a sync after it", arguments: [false, true])
    func nothingShownBeforeItsSync(onLoop: Bool) async throws {
        let directory = try TemporaryDirectory(prefix: "walsync")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "synced", syncThread: true, migrator: GroupCommitTests.migrator())
        #expect(try database.synchronousSetting() == 1, "the writer leaves the syncing to the thread")
        let syncer = try #require(database.syncer)
        let (writer, reactor, context) = try GroupCommitTests.writer(database, onLoop: onLoop)
        try await writer.write { db, batch in try batch.append(key: "k", Self.note("first")) }
        #expect(database.durableEventSeq == 1)

        // Given syncs held, a write commits (a plain read of the pool sees it)...
        syncer.hold(true)
        let answered = Done()
        let pending = Task {
            try await writer.write { db, batch in
                try db.execute(sql: "INSERT INTO note (id, text) VALUES (1, 'second')")
                try batch.append(key: "k", Self.note("second"))
            }
            answered.set()
        }
        #expect(await waitUntil { (try? await database.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM storebus_event") }) == 2 })
        // ...and reads and a write of its own go through the database.
        let read = Task { try await database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") ?? -1 } }
        let setting = Task { try await database.write { db in try db.execute(sql: "INSERT INTO note (id, text) VALUES (2, 'setting')") } }
        try await Task.sleep(for: .milliseconds(200))

        // Then nothing is answered, and a page of the log stops before the new event
        #expect(!answered.isSet)
        #expect(database.durableEventSeq == 1)
        let page = try await database.pool.read { db in
            (events: try EventLog.read(db, key: "k", after: 0, limit: 10, through: database.durableEventSeq).map(\.keySeq),
             head: try EventLog.head(db, key: "k", through: database.durableEventSeq),
             logHead: try EventLog.head(db, key: "", through: database.durableEventSeq),
             all: try EventLog.head(db, key: "k"))
        }
        #expect(page.events == [1] && page.head == 1 && page.logHead == 1 && page.all == 2)

        // When syncs go again, everything is answered and served
        syncer.hold(false)
        try await pending.value
        #expect(answered.isSet)
        #expect(try await read.value >= 1)
        try await setting.value
        #expect(database.durableEventSeq == 2)
        let served = try await database.pool.read { db in try EventLog.read(db, key: "k", after: 0, limit: 10, through: database.durableEventSeq).map(\.keySeq) }
        #expect(served == [1, 2])

        // A read with nothing written since the last sync returns at once, even with syncs held
        syncer.hold(true)
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note") } == 2)
        syncer.hold(false)

        reactor?.stop()
        await reactor?.join()
        context?.terminate()
        try database.close()
    }

    @Test("writes that end out of order are durable only once every write numbered before them has ended and a sync has followed")
    func outOfOrderEnds() async throws {
        let directory = try TemporaryDirectory(prefix: "walsync")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "order", syncThread: true, migrator: GroupCommitTests.migrator())
        let syncer = try #require(database.syncer)
        let first = syncer.begin(), second = syncer.begin()
        let secondDurable = Done()
        syncer.end(second, lastSeq: 7) { secondDurable.set() }
        // A read now could have seen both writes: it waits for both.
        let readDurable = Done()
        syncer.afterBegun { readDurable.set() }
        // The second write's events are durable after the next sync (commit order is position order:
        // every event before them committed before them, so the sync covers those too)...
        #expect(await waitUntil { database.durableEventSeq == 7 })
        // ...but its answer, and the read's, wait for the first write, which may have committed too.
        try await Task.sleep(for: .milliseconds(200))
        #expect(!secondDurable.isSet && !readDurable.isSet, "the first write has not ended")

        let firstDurable = Done()
        syncer.end(first, lastSeq: nil) { firstDurable.set() }
        #expect(await waitUntil { firstDurable.isSet && secondDurable.isSet && readDurable.isSet })
        #expect(database.durableEventSeq == 7)
        try database.close()
    }

    @Test("closing the database syncs what has ended and answers what waited for it")
    func closeSyncsTheRest() async throws {
        let directory = try TemporaryDirectory(prefix: "walsync")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "close", syncThread: true, migrator: GroupCommitTests.migrator())
        let syncer = try #require(database.syncer)
        syncer.hold(true)
        let mark = syncer.begin()
        let durable = Done()
        syncer.end(mark, lastSeq: 3) { durable.set() }
        try database.close()
        #expect(durable.isSet)
    }
}
