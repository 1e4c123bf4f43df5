import Foundation
import Logging
import StoreBus
import StoreBusPostgres
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing

/// A sharded log on PostgreSQL: shards shared out among instances by leases, taken over when a
/// lease lapses, and an owner that lost its lease fenced off its shards' logs.
@Suite("Shard leases on PostgreSQL")
struct ShardLeasesTests {
    @Test("FNV-1a of app|account, modulo the shards: the same numbers as another implementation gives")
    func hash() {
        // Worked out with Python: FNV-1a 64 of the UTF-8 bytes, modulo the count.
        #expect(ShardHash.shard(app: "com.storebus.demo.puzzle", account: "alice", count: 16) == 4)
        #expect(ShardHash.shard(app: "com.storebus.demo.puzzle", account: "bob", count: 16) == 15)
        #expect(ShardHash.shard(app: "com.storebus.demo.puzzle", account: "alice", count: 3) == 1)
        #expect(ShardHash.shard(app: "com.storebus.demo.puzzle", account: "bob", count: 3) == 0)
        #expect(ShardHash.shard(ofQueueKey: "com.storebus.demo.puzzle|alice|phone", count: 16) == 4)
        #expect(ShardHash.shard(ofQueueKey: "com.storebus.demo.puzzle|alice|tablet", count: 16) == 4, "every device of an account in one shard")
        #expect(ShardHash.shard(app: "com.storebus.demo.puzzle", account: "alice", count: 1) == 0)
    }

    @Test("postgres settings round-trip through JSON, and defaults fill what a config file leaves out")
    func settingsJSON() throws {
        var settings = PostgresSettings(hosts: ["db1:5432", "[::1]:6543"], user: "u", database: "d", passwordFile: "/p", readers: 2, shards: 16, leaseSeconds: 3)
        settings.connectTimeoutSeconds = 2
        let json = try JSONEncoder().encode(settings)
        #expect(try JSONDecoder().decode(PostgresSettings.self, from: json) == settings, "\(String(decoding: json, as: UTF8.self))")
        let minimal = try JSONDecoder().decode(PostgresSettings.self, from: Data(#"{"hosts": ["db"]}"#.utf8))
        #expect(minimal == PostgresSettings(hosts: ["db"], user: "storebus", database: "storebus"))
        try minimal.validate()
        #expect(throws: StartupError.self) { try PostgresSettings(hosts: ["db:99999"], user: "u", database: "d").validate() }
        #expect(throws: StartupError.self) { try PostgresSettings(hosts: ["db"], user: "u", database: "d", shards: 0).validate() }
    }

    @Test("a database holds one service's state: another service's schema is refused there, saying which setting to change; the same service's again is not")
    func oneServiceADatabase() async throws {
        try await PostgresServer.running { server in
            let queue = PostgresSchema(service: "storebus-payment-queue", steps: [("queue_v1", ["CREATE TABLE queue_thing (id BIGINT PRIMARY KEY)"])])
            let receipt = PostgresSchema(service: "storebus-receipt", steps: [("receipt_v1", ["CREATE TABLE receipt_thing (id BIGINT PRIMARY KEY)"])])
            try PostgresDatabase(settings: server.settings(), schema: queue, logger: Logger(label: "test")).close()
            try PostgresDatabase(settings: server.settings(), schema: queue, logger: Logger(label: "test")).close()
            let refused = #expect(throws: StartupError.self) { _ = try PostgresDatabase(settings: server.settings(), schema: receipt, logger: Logger(label: "test")) }
            #expect(refused?.description.contains("storebus-payment-queue") == true && refused?.description.contains("postgres.database") == true, "\(String(describing: refused))")
            let own = try await server.createDatabase("receipts")
            try PostgresDatabase(settings: own, schema: receipt, logger: Logger(label: "test")).close()
        }
    }

    @Test("a database fenced by a lease writes while its instance holds the lease, and refuses every write NOT_OWNER once another instance took the lapsed lease over")
    func writeFence() async throws {
        try await PostgresServer.running { server in
            let schema = PostgresSchema.shardLeases.adding(PostgresSchema(steps: [("fence_v1", ["CREATE TABLE fenced (id BIGINT PRIMARY KEY)"])]))
            func instance() throws -> (PostgresDatabase, ShardLeases) {
                let database = try PostgresDatabase(settings: server.settings(), schema: schema, logger: Logger(label: "test"))
                let leases = try ShardLeases(
                    database: database, logName: "active", shardCount: 1, lease: .seconds(4), endpoints: .init(rpc: [], events: []), logger: Logger(label: "test"))
                return (database, leases)
            }
            let (first, firstLeases) = try instance()
            let (second, secondLeases) = try instance()
            #expect(try await firstLeases.round()[0] != nil)
            #expect(try await secondLeases.round()[0] == nil, "one instance holds it")
            first.fence(firstLeases)
            // Renewed just before the write, so that a busy host's stall since the take (CI once
            // stalled past a 1 s lease here) does not lapse it first.
            #expect(try await firstLeases.round()[0] != nil)
            try await first.write { db in try db.execute(cached: "INSERT INTO fenced (id) VALUES (1)") }
            // The first stops renewing (paused); its lease lapses and the second takes it over.
            #expect(await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) { (try? await secondLeases.round()[0]) != nil })
            #expect(firstLeases.epoch(of: 0) != nil, "the first still believes it holds the lease")
            let refused = await #expect(throws: RPCError.self) {
                try await first.write { db in try db.execute(cached: "INSERT INTO fenced (id) VALUES (2)") }
            }
            #expect(refused?.isNotOwner == true, "\(String(describing: refused))")
            second.fence(secondLeases)
            try await second.write { db in try db.execute(cached: "INSERT INTO fenced (id) VALUES (3)") }
            let ids = try await second.read { db in try db.values(Int64.self, cached: "SELECT id FROM fenced ORDER BY id") }
            #expect(ids == [1, 3])
            try first.close()
            try second.close()
        }
    }

    static let logName = "sharded-test"

    /// An instance: its database, leases and log writer.
    struct Instance {
        let database: PostgresDatabase
        let leases: ShardLeases
        let writer: EventLogWriter

        init(_ server: PostgresServer, shards: UInt32, lease: Duration) throws {
            var settings = server.settings()
            settings.leaseSeconds = Double(lease.components.seconds)
            database = try PostgresDatabase(settings: settings, schema: PostgresSchema.eventLog, logger: Logger(label: "test"))
            leases = try ShardLeases(
                database: database, logName: ShardLeasesTests.logName, shardCount: shards, lease: lease, endpoints: .init(rpc: ["tcp://a"], events: []),
                logger: Logger(label: "test"))
            database.shard(leases)
            let leases = leases
            writer = EventLogWriter(logName: ShardLeasesTests.logName, database: database, publisher: nil, shardOf: { leases.shard(ofKey: $0) })
        }

        /// Appends one event for `key`; the error when refused.
        func append(_ key: String) async -> (any Error)? {
            do {
                _ = try await writer.write { _, batch in
                    try batch.appendJSON(key: key, type: "test.Note", payloadJSON: "{}")
                }
                return nil
            } catch {
                return error
            }
        }
    }

    /// A queue key of each shard.
    static func keys(shards: UInt32) -> [UInt32: String] {
        var keys: [UInt32: String] = [:]
        var index = 0
        while keys.count < Int(shards) {
            let key = "com.example.app|account-\(index)|phone"
            let shard = ShardHash.shard(ofQueueKey: key, count: shards)
            if keys[shard] == nil { keys[shard] = key }
            index += 1
        }
        return keys
    }

    static func isNotOwner(_ error: (any Error)?) -> Bool {
        guard let error = error as? RPCError else { return false }
        return error.code == .unavailable && error.message.contains("does not own shard")
    }

    @Test("two instances share four shards; the one paused past its lease loses them to the other with a new epoch and its appends are refused; positions stay gapless")
    func shareTakeOverAndFence() async throws {
        try await PostgresServer.running { server in
            let keys = Self.keys(shards: 4)
            // Leases of 5 s: every step before the pause must fit in one, even on a busy host.
            let a = try Instance(server, shards: 4, lease: .seconds(5))
            #expect(try await a.leases.round().count == 4, "alone, it takes every shard")
            #expect(await a.append(keys[0]!) == nil)
            #expect(await a.append(keys[3]!) == nil)

            let b = try Instance(server, shards: 4, lease: .seconds(5))
            #expect(try await b.leases.round().isEmpty, "nothing has lapsed yet")
            #expect(try await a.leases.round().keys.sorted() == [0, 1], "a lets go of what is beyond its share, the highest shards")
            let taken = try await b.leases.round()
            #expect(taken.keys.sorted() == [2, 3])
            #expect(taken[3] == 2, "a shard taken over has a new epoch")
            #expect(Self.isNotOwner(await a.append(keys[3]!)), "a no longer writes shard 3")
            #expect(await b.append(keys[3]!) == nil)

            // a is paused: it renews nothing. Once its leases lapse, b takes them over.
            try await Task.sleep(for: .milliseconds(5500))
            _ = try await b.leases.round()
            let all = try await b.leases.round()
            #expect(all.keys.sorted() == [0, 1, 2, 3], "b holds every shard once a's leases lapsed: \(all)")
            #expect(all[0] == 2)
            // a wakes up still believing it owns shards 0 and 1 with their old epoch: refused.
            #expect(a.leases.epoch(of: 0) == 1)
            #expect(Self.isNotOwner(await a.append(keys[0]!)), "fenced")
            #expect(await b.append(keys[0]!) == nil)

            // Every shard's positions are gapless, whoever wrote them.
            let events = try await b.database.read { db in
                try (0..<4).map { shard in try EventLog.read(db, key: "", shard: UInt32(shard), after: 0, limit: 100) }
            }
            #expect(events[0].map(\.seq) == [1, 2])
            #expect(events[3].map(\.seq) == [1, 2])
            #expect(events[0].allSatisfy { $0.shard == 0 } && events[3].allSatisfy { $0.shard == 3 })
            #expect(events[0].map(\.keySeq) == [1, 2], "the key's positions go on across owners")
            let map = try await b.leases.map()
            #expect(map.map(\.owner) == Array(repeating: b.leases.instance, count: 4))
            #expect(map.map(\.head) == [2, 0, 0, 2])
            #expect(map.allSatisfy { $0.leased && $0.endpoints.rpc == ["tcp://a"] })

            // A stopping instance lets go at once.
            try await b.leases.releaseAll()
            #expect(try await a.leases.round().keys.sorted() == [0, 1, 2, 3])
            try a.database.close()
            try b.database.close()
        }
    }

    @Test("a database made with some number of shards refuses an instance configured for another")
    func shardCountFixed() async throws {
        try await PostgresServer.running { server in
            let a = try Instance(server, shards: 4, lease: .seconds(5))
            #expect(throws: RPCError.self) { _ = try Instance(server, shards: 8, lease: .seconds(5)) }
            try a.database.close()
        }
    }
}
