import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The notification service on PostgreSQL: one active instance, a standby taking over when the
/// active one is lost or paused past its lease; the notification log stays exactly once and gapless.
@Suite(.serialized)
struct NotificationsStandbyTests {
    @Test(
        "on PostgreSQL the active notification instance is SIGKILLed, and later its successor paused past its lease: each time the standby takes over, and every purchase has exactly one notification, gapless; the paused one, continued, writes nothing and ends"
    )
    func standbyTakesOver() async throws {
        try await PostgresServer.running { server in
            var queue = server.settings()
            queue.shards = 2
            var notifications = try await server.createDatabase("notifications")
            notifications.leaseSeconds = 2
            try await StoreCluster(gatewayCount: 1, queuePostgres: queue, notificationsPostgres: notifications, notificationInstances: 2).running { cluster in
                let reader = try cluster.server()
                let queue = try PaymentQueue(configuration: cluster.configuration(account: "kim"))
                /// The endpoint of the instance holding the active lease now (nil: none holds it).
                func active() async -> String? {
                    let answer = await PostgresHA.query(
                        port: server.port, user: PostgresServer.user, database: "notifications",
                        """
                        SELECT i.rpc_endpoints FROM storebus_shard s JOIN storebus_instance i ON i.log = s.log AND i.instance = s.owner
                        WHERE s.log = 'notifications-active' AND s.expires_at > clock_timestamp()
                        """)
                    return answer.flatMap { $0.isEmpty ? nil : $0 }
                }
                func waitForActive(_ index: Int) async -> Bool {
                    await waitUntil(timeout: .seconds(30), interval: .milliseconds(100)) { await active() == cluster.notificationEndpoints[index] }
                }
                #expect(await waitForActive(0))
                var bought: [String] = []
                func buy(_ count: Int) async throws {
                    for _ in 0..<count {
                        guard case .success(let transaction) = try await queue.purchase(Payment(productIdentifier: coins)) else { continue }
                        bought.append(transaction.id)
                        try await queue.finish(transaction)
                    }
                }
                try await buy(6)
                // The active instance is lost: the standby takes over once the lease lapses, while
                // purchases go on.
                await cluster.notificationInstances[0].kill()
                try await buy(4)
                #expect(await waitForActive(1), "the standby never took over: \(cluster.logs)")
                // The first comes back, standing by; the one active now is paused past its lease,
                // and the first takes over.
                try cluster.notificationInstances[0].start()
                try await buy(4)
                cluster.notificationInstances[1].signal(SIGSTOP)
                try await buy(4)
                #expect(await waitForActive(0), "the paused instance's lease was never taken over: \(cluster.logs)")
                try await buy(4)
                cluster.notificationInstances[1].signal(SIGCONT)
                try await buy(4)
                let notifications = try await NotificationsEndToEndTests.read(reader, count: bought.count, timeout: .seconds(60))
                #expect(notifications.map(\.transactionID) == bought, "\(cluster.logs)")
                #expect(notifications.map(\.position) == Array(1...UInt64(bought.count)))
                #expect(Set(notifications.map(\.notificationUuid)).count == bought.count)
                let after = try await reader.call(
                    Storebus_Notifications_V1_Notifications.readNotifications,
                    .with {
                        $0.afterPosition = UInt64(bought.count)
                        $0.waitMs = 500
                    })
                #expect(after.notifications.isEmpty, "none twice")
                // The paused instance found its lease gone and ended (to stand by when started again).
                #expect(await cluster.notificationInstances[1].waitForExit(timeout: .seconds(20)) != nil, "\(cluster.notificationInstances[1].output)")
                await queue.close()
                await reader.close()
            }
        }
    }
}
