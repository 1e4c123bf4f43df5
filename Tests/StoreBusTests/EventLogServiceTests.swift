import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing

@Suite("Event log service: ReadEvents pages")
struct EventLogServiceTests {
    @Test("a page stops before 1 MiB of events, holds at least one, and reading on from its last event gets the rest")
    func pagesAreBoundedByBytes() async throws {
        let (directory, database, writer) = try Self.eventLog("pages")
        defer { directory.remove() }
        // Given 16 events of 300 KiB (4.8 MB together, over the 4 MiB message limit) and one of 1.5 MiB
        let sizes = Array(repeating: 300 * 1024, count: 16) + [1536 * 1024]
        for (index, size) in sizes.enumerated() {
            _ = try await writer.write { _, batch in
                try batch.append(
                    key: "big",
                    Storebus_Testkit_V1_AppendRequest.with {
                        $0.key = "big"; $0.text = String(repeating: "\(index % 10)", count: size)
                    })
            }
        }
        let server = try TestServer(extra: try EventLogHandlers(database: database).router)
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            // When a follower reads the key with the largest page it may ask for
            var position: UInt64 = 0
            var pages: [Int] = []
            while position < UInt64(sizes.count) {
                let page = try await client.call(
                    Storebus_Eventlog_V1_EventLog.readEvents,
                    .with {
                        $0.key = "big"
                        $0.afterSeq = position
                        $0.limit = EventLogHandlers.maxPageSize
                    })
                #expect(page.headSeq == UInt64(sizes.count))
                #expect(page.events.map(\.keySeq) == Array(position + 1...position + UInt64(page.events.count)), "consecutive")
                pages.append(page.events.count)
                position += UInt64(page.events.count)
                guard !page.events.isEmpty else { break }
            }
            // Then each page holds what fits in 1 MiB (three 300 KiB events), the big event comes alone,
            // and every event arrives once
            #expect(pages == [3, 3, 3, 3, 3, 1, 1])
            #expect(position == UInt64(sizes.count))
        }
        await server.stop()
    }

    @Test("a position past any SQLite integer (up to UInt64.max) reads nothing, and the server goes on answering")
    func hugePositionsReadNothing() async throws {
        let (directory, database, writer) = try Self.eventLog("huge")
        defer { directory.remove() }
        _ = try await writer.write { _, batch in
            try batch.append(
                key: "k",
                Storebus_Testkit_V1_AppendRequest.with {
                    $0.key = "k"; $0.text = "one"
                })
        }
        let server = try TestServer(extra: try EventLogHandlers(database: database).router)
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            // Binding such a position to SQLite used to trap: the process died.
            for position in [UInt64(Int64.max) - 1, UInt64(Int64.max), UInt64(Int64.max) + 1, .max - 1, .max] {
                for key in ["k", ""] {
                    let page = try await client.call(
                        Storebus_Eventlog_V1_EventLog.readEvents,
                        .with {
                            $0.key = key
                            $0.afterSeq = position
                        })
                    #expect(page.events.isEmpty, "after \(position) in \(key.isEmpty ? "the whole log" : "key k")")
                    #expect(page.headSeq == 1)
                }
            }
            let first = try await client.call(Storebus_Eventlog_V1_EventLog.readEvents, .with { $0.key = "k" })
            #expect(first.events.map(\.keySeq) == [1])
        }
        await server.stop()
    }

    /// A database holding only the event log, in a directory of its own, and its writer (announcing
    /// nothing).
    private static func eventLog(_ name: String) throws -> (TemporaryDirectory, StoreDatabase, EventLogWriter) {
        let directory = try TemporaryDirectory(prefix: name)
        var migrator = DatabaseMigrator()
        EventLog.registerMigrations(&migrator)
        let database = try StoreDatabase(directory: directory.url, name: name, migrator: migrator)
        return (directory, database, EventLogWriter(logName: name, database: database, publisher: nil))
    }
}
