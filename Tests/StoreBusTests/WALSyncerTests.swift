import Foundation
import GRDB
import StoreBus
import StoreBusServer
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing
import ZeroMQ

@testable import StoreBusStorage

@Suite("WAL sync thread")
struct WALSyncerTests {
    /// Set once, read by the test.
    final class Done: Sendable {
        private let done = Atomic<Bool>(false)
        var isSet: Bool { done.load(ordering: .acquiring) }
        func set() { done.store(true, ordering: .releasing) }
    }

    static func note(_ text: String) -> Storebus_Testkit_V1_AppendRequest {
        .with {
            $0.key = "k"; $0.text = text
        }
    }

    /// A database with a sync thread (the group commit tests' tables), in a directory of its own, and
    /// its sync thread.
    static func synced(_ name: String) throws -> (TemporaryDirectory, StoreDatabase, WALSyncer) {
        let directory = try TemporaryDirectory(prefix: "walsync")
        let database = try StoreDatabase(directory: directory.url, name: name, syncThread: true, migrator: GroupCommitTests.migrator())
        return (directory, database, try #require(database.syncer))
    }

    @Test(
        "with a sync thread, a commit is not answered, rung, served by ReadEvents, nor shown by reads (their errors included) or writes after it, until a sync after it", .timeLimit(.minutes(1)),
        arguments: [false, true])
    func nothingShownBeforeItsSync(onLoop: Bool) async throws {
        let (directory, database, syncer) = try Self.synced("synced")
        defer { directory.remove() }
        #expect(try database.synchronousSetting() == 1, "the writer leaves the syncing to the thread")
        let context = try ZeroMQ.Context()
        let reactor: Reactor? = onLoop ? Reactor(name: "walsync", context: context) : nil
        reactor?.start()
        let publisher = try DoorbellPublisher(endpoints: ["tcp://127.0.0.1:*"], context: context)
        let heard = Mutex<[String]>([])
        let board = try DoorbellBoard(
            endpoints: publisher.boundEndpoints, log: "walsync", context: context,
            heard: { doorbell in
                heard.withLock { $0.append("\(doorbell.key)/\(doorbell.keySeq)") }
            })
        let writer = EventLogWriter(logName: "walsync", database: database, publisher: publisher, reactor: reactor)
        let server = try TestServer(extra: try EventLogHandlers(database: database).router)
        // Writes to another key until the board hears one: its subscription is then connected.
        var connecting = 0
        while !heard.withLock({ !$0.isEmpty }) && connecting < 500 {
            connecting += 1
            let text = "\(connecting)"
            _ = try await writer.write { _, batch in try batch.append(key: "connect", Self.note(text)) }
            try await Task.sleep(for: .milliseconds(10))
        }
        _ = try await writer.write { _, batch in try batch.append(key: "k", Self.note("first")) }
        #expect(await waitUntil { heard.withLock { $0.contains("k/1") } })
        let firstSeq = database.durableEventSeq

        try await withRPCClient(endpoints: [server.endpoint]) { client in
            func page() async throws -> (keySeqs: [UInt64], head: UInt64, logHead: UInt64) {
                let page = try await client.call(Storebus_Eventlog_V1_EventLog.readEvents, .with { $0.key = "k" })
                let log = try await client.call(Storebus_Eventlog_V1_EventLog.readEvents, .with { $0.afterSeq = firstSeq - 1 })
                return (page.events.map(\.keySeq), page.headSeq, log.headSeq)
            }
            #expect(try await page() == ([1], 1, firstSeq))

            // Given syncs held, a write commits (a plain read of the pool sees it)...
            syncer.hold(true)
            let answered = Done(), read = Done(), refused = Done(), set = Done()
            let pending = Task {
                try await writer.write { db, batch in
                    try db.execute(cached: "INSERT INTO note (id, text) VALUES (1, 'second')")
                    try batch.append(key: "k", Self.note("second"))
                }
                answered.set()
            }
            #expect(await waitUntil { (try? await database.pool.read { db in try db.value(Int.self, cached: CachedSQL("SELECT COUNT(*) FROM note")) }) == 1 })
            // ...and a read that sees it, one that fails on seeing it, and a write of its own go
            // through the database.
            let reading = Task {
                let count = try await database.read { db in try db.value(Int.self, cached: CachedSQL("SELECT COUNT(*) FROM note WHERE id = 1")) ?? -1 }
                read.set()
                return count
            }
            let refusing = Task {
                do {
                    try await database.read { db in
                        if try db.value(Int.self, cached: CachedSQL("SELECT COUNT(*) FROM note WHERE id = 1")) == 1 { throw GroupCommitTests.Refused() }
                    }
                } catch {
                    refused.set()
                }
            }
            let setting = Task {
                try await database.write { db in try db.execute(cached: "INSERT INTO note (id, text) VALUES (2, 'setting')") }
                set.set()
            }
            try await Task.sleep(for: .milliseconds(300))

            // Then nothing is answered or rung, and ReadEvents stops before the new event
            #expect(!answered.isSet && !read.isSet && !refused.isSet && !set.isSet)
            #expect(!heard.withLock { $0.contains("k/2") })
            #expect(database.durableEventSeq == firstSeq)
            #expect(try await page() == ([1], 1, firstSeq))
            #expect(try await database.pool.read { db in try EventLog.head(db, key: "k") } == 2, "committed all the same")

            // When syncs go again, everything is answered, rung and served
            syncer.hold(false)
            try await pending.value
            #expect(try await reading.value == 1)
            await refusing.value
            #expect(refused.isSet)
            try await setting.value
            #expect(set.isSet)
            #expect(await waitUntil { heard.withLock { $0.contains("k/2") } })
            #expect(database.durableEventSeq == firstSeq + 1)
            #expect(try await page() == ([1, 2], 2, firstSeq + 1))

            // A read with nothing written since the last sync returns at once, even with syncs held
            syncer.hold(true)
            #expect(try await database.read { db in try db.value(Int.self, cached: CachedSQL("SELECT COUNT(*) FROM note")) } == 2)
            syncer.hold(false)
        }

        await server.stop()
        await board.shutdown()
        await publisher.shutdown()
        reactor?.stop()
        await reactor?.join()
        context.terminate()
        try database.close()
    }

    @Test("writes that end out of order are durable only once every write numbered before them has ended and a sync has followed")
    func outOfOrderEnds() async throws {
        let (directory, database, syncer) = try Self.synced("order")
        defer { directory.remove() }
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
        let (directory, database, syncer) = try Self.synced("close")
        defer { directory.remove() }
        syncer.hold(true)
        let mark = syncer.begin()
        let durable = Done()
        syncer.end(mark, lastSeq: 3) { durable.set() }
        try database.close()
        #expect(durable.isSet)
        #expect(database.durableEventSeq == 3, "synced, not only let go")
    }
}
