import Foundation
import GRDB
import StoreBus
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Testing

@testable import Notifications

/// Retention: old notifications are pruned a prefix at a time, and a reader after a pruned position
/// hears OUT_OF_RANGE with the oldest position kept, never a silent gap.
struct RetentionTests {
    static func test(_ index: Int, app: String = puzzle) -> Storebus_Notifications_V1_Notification {
        .with {
            $0.notificationUuid = "t\(index)"; $0.notificationType = "TEST"; $0.signedPayload = "p\(index)"; $0.appBundleID = app
        }
    }

    @Test("prune deletes the oldest prefix, never the newest notification nor one whose delivery is pending or any after it; positions go on")
    func prunePrefix() async throws {
        let scratch = try ScratchNotifications(prefix: "prune")
        defer { scratch.directory.remove() }
        let (database, store) = (scratch.database, scratch.store)
        for index in 1...5 { _ = try await store.append(Self.test(index)) }
        #expect(try await store.prune(before: EpochMilliseconds.now + 1_000) == 4)
        let (oldest, head) = (try await store.oldest(app: puzzle), try await store.head(app: puzzle))
        #expect(oldest == 5 && head == 5)
        // Positions go on from the newest kept.
        #expect(try await store.append(Self.test(6)) == 6)
        // A pending delivery holds itself and what follows.
        let hooked = NotificationStore(database: database, webhooks: [puzzle: "http://127.0.0.1:9/hook"])
        #expect(try await hooked.append(Self.test(7)) == 7)
        _ = try await store.append(Self.test(8))
        #expect(try await store.prune(before: EpochMilliseconds.now + 1_000) == 2)
        #expect(try await store.oldest(app: puzzle) == 7)
        let kept = try await store.read(app: puzzle, after: 0, limit: 10).notifications.map(\.position)
        #expect(kept == [7, 8])
        try database.close()
    }

    @Test("the service prunes by age: a reader after a pruned position hears OUT_OF_RANGE (POSITION_PRUNED) with the oldest position kept; from 0 or the oldest it reads on")
    func outOfRangeWhenPruned() async throws {
        let directory = try TemporaryDirectory(prefix: "retain")
        defer { directory.remove() }
        let data = directory.url.appendingPathComponent("data")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        do {
            let database = try StoreDatabase(directory: data, name: "notifications", durability: .full, migrator: NotificationsSchema.migrator)
            let store = NotificationStore(database: database)
            for index in 1...5 { _ = try await store.append(Self.test(index)) }
            try database.close()
        }
        // A retention of about 0.9 s; upstreams absent (nothing new comes).
        let config = directory.url.appendingPathComponent("notifications.json")
        try JSONSerialization.data(withJSONObject: ["service": ["httpAddress": "", "retentionDays": 0.00001]]).write(to: config)
        let endpoint = directory.ipcEndpoint("notifications")
        let process = ServiceProcess(
            name: "storebus-notifications",
            arguments: [
                "--config", config.path, "--rpc-endpoint", endpoint, "--data-dir", data.path, "--payment-queue-endpoint", directory.ipcEndpoint("pq"),
                "--payment-queue-events", directory.ipcEndpoint("pq-events"), "--receipt-endpoint", directory.ipcEndpoint("receipt"), "--log-level", "info"
            ],
            logFile: directory.url.appendingPathComponent("notifications.log"))
        try process.start()
        try await process.waitUntilServing(endpoint: endpoint)
        let client = try RPCClient(configuration: ClientConfiguration(endpoints: [endpoint]))
        func read(after position: UInt64) async throws -> Storebus_Notifications_V1_ReadNotificationsResponse {
            try await client.call(
                Storebus_Notifications_V1_Notifications.readNotifications,
                .with {
                    $0.appBundleID = puzzle; $0.afterPosition = position
                })
        }
        #expect(
            await waitUntil(timeout: .seconds(30)) { (try? await read(after: 0))?.notifications.map(\.position) == [5] },
            "not pruned: \(process.output)")
        do {
            _ = try await read(after: 2)
            Issue.record("a pruned position was read on")
        } catch let error as RPCError {
            #expect(error.code == .outOfRange && error.details.info.reason == "POSITION_PRUNED", "\(error)")
            #expect(error.details.info.metadata["oldestPosition"] == "5")
        }
        #expect(try await read(after: 4).notifications.map(\.position) == [5])
        let atHead = try await read(after: 5)
        #expect(atHead.notifications.isEmpty && atHead.headPosition == 5)
        await client.shutdown()
        _ = await process.stop()
    }

    @Test("production and sandbox webhooks: a sandbox notification goes to the sandbox URL, else to the production one; an admin's URLs win over the configuration's, each on its own")
    func sandboxAndProductionWebhooks() async throws {
        let directory = try TemporaryDirectory(prefix: "hooks")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "notifications", durability: .normal, migrator: NotificationsSchema.migrator)
        let store = NotificationStore(
            database: database, webhooks: [puzzle: "http://prod.example/hook", "com.example.other": "http://other.example/hook"],
            sandboxWebhooks: [puzzle: "http://sandbox.example/hook"])
        _ = try await store.append(Self.test(1), environment: "Sandbox")
        _ = try await store.append(Self.test(2), environment: "Production")
        _ = try await store.append(Self.test(3, app: "com.example.other"), environment: "Sandbox")
        let set = try await store.setWebhook(app: puzzle, url: "", sandboxURL: "http://admin.example/sandbox")
        #expect(set.production == "http://prod.example/hook" && set.sandbox == "http://admin.example/sandbox")
        _ = try await store.append(Self.test(4), environment: "Sandbox")
        let cleared = try await store.setWebhook(app: puzzle, url: "", sandboxURL: "")
        #expect(cleared.sandbox == "http://sandbox.example/hook")
        let urls = try await database.read { db in try db.values(String.self, cached: "SELECT url FROM nt_delivery ORDER BY app, position") }
        #expect(
            urls == ["http://other.example/hook", "http://sandbox.example/hook", "http://prod.example/hook", "http://admin.example/sandbox"], "\(urls)")
        try database.close()
    }
}
