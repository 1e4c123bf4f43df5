import Foundation
import GRDB
import Logging
import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Synchronization
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

    @Test(
        "with topics, a page holds the events in any of them and says how far it read; a rare topic steps over the log in bounded reads; an event in every topic matches any; a follower with topics hands over those and reaches the head; an unknown topic is INVALID_ARGUMENT"
    )
    func topics() async throws {
        let (directory, database, writer) = try Self.eventLog("topics")
        defer { directory.remove() }
        let names = ["a", "b", "c"]
        let (a, b, c) = (EventTopics(rawValue: 1), EventTopics(rawValue: 2), EventTopics(rawValue: 4))
        // Given, in key k: an event in a, one in b, one in none, one in every topic (an event written
        // before its log had topics); then 2 x maxScan events in c under another key; then one in a
        let bulk = Int(2 * EventLogHandlers.maxScan)
        _ = try await writer.write { _, batch in
            func add(_ key: String, _ text: String, _ topics: EventTopics) throws {
                try batch.append(
                    key: key,
                    Storebus_Testkit_V1_AppendRequest.with {
                        $0.key = key; $0.text = text
                    }, topics: topics)
            }
            try add("k", "a", a)
            try add("k", "b", b)
            try add("k", "none", [])
            try add("k", "all", .all)
            for index in 0..<bulk { try add("bulk", "\(index)", c) }
            try add("k", "a again", a)
        }
        let head = UInt64(bulk + 5)
        let server = try TestServer(extra: try EventLogHandlers(database: database, topics: names).router)
        try await withRPCClient(endpoints: [server.endpoint]) { client in
            func read(_ topics: [String], after: UInt64, key: String = "", limit: UInt32 = 1000) async throws -> Storebus_Eventlog_V1_ReadEventsResponse {
                try await client.call(
                    Storebus_Eventlog_V1_EventLog.readEvents,
                    .with {
                        $0.key = key; $0.afterSeq = after; $0.limit = limit; $0.topics = topics
                    })
            }
            // When a follower of a reads on from each page's through_seq
            var position: UInt64 = 0
            var seen: [UInt64] = []
            var throughs: [UInt64] = []
            while position < head {
                let page = try await read(["a"], after: position)
                #expect(page.headSeq == head)
                seen += page.events.map(\.seq)
                throughs.append(page.throughSeq)
                #expect(page.throughSeq > position, "every page moves on")
                position = page.throughSeq
            }
            // Then it got the a events and the one in every topic, in three reads of at most
            // maxScan positions each
            #expect(seen == [1, 4, head])
            #expect(throughs == [EventLogHandlers.maxScan, 2 * EventLogHandlers.maxScan, head])
            // A full page ends at its last event; several topics are read together
            let full = try await read(["b", "c"], after: 0, limit: 3)
            #expect(full.events.map(\.seq) == [2, 4, 5] && full.throughSeq == 5)
            // Within a key, positions are the key's
            let keyed = try await read(["a"], after: 0, key: "k")
            #expect(keyed.events.map(\.keySeq) == [1, 4, 5] && keyed.throughSeq == 5 && keyed.headSeq == 5)
            // Without topics, through_seq is the last event's
            let plain = try await read([], after: 1, limit: 2)
            #expect(plain.events.map(\.seq) == [2, 3] && plain.throughSeq == 3)

            // A follower with topics hands over only theirs, and its position reaches the head
            var configuration = EventFollower.Configuration(log: "topics", topics: ["a"], doorbellEndpoints: [])
            configuration.idlePoll = .milliseconds(20)
            let follower = try EventFollower(configuration: configuration, client: client, context: server.context, logger: Logger(label: "test"))
            let followed = Mutex<(seqs: [UInt64], through: UInt64)>(([], 0))
            let following = Task {
                try await follower.followPages(after: 0, as: Storebus_Eventlog_V1_ReadEventsResponse.self) { events, through in
                    followed.withLock {
                        $0.seqs += events.map(\.seq); $0.through = through
                    }
                    if through == head { throw CancellationError() }
                }
            }
            _ = await following.result
            await follower.shutdown()
            #expect(followed.withLock { $0.seqs } == [1, 4, head])
            #expect(followed.withLock { $0.through } == head)

            // An unknown topic is refused, naming the field
            for topics in [["a", "d"], ["A"]] {
                let error = await #expect(throws: RPCError.self) { _ = try await read(topics, after: 0) }
                #expect(error?.code == .invalidArgument && error?.status.fieldViolations.first?.field == "topics", "\(topics): \(String(describing: error))")
            }
        }
        await server.stop()
        // and a log without topics refuses any
        let plainServer = try TestServer(extra: try EventLogHandlers(database: database).router)
        try await withRPCClient(endpoints: [plainServer.endpoint]) { client in
            let error = await #expect(throws: RPCError.self) {
                _ = try await client.call(Storebus_Eventlog_V1_EventLog.readEvents, .with { $0.topics = ["a"] })
            }
            #expect(error?.code == .invalidArgument)
        }
        await plainServer.stop()
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
