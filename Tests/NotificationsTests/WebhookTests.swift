import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import StoreBus
import StoreBusSDK
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import Synchronization
import Testing

@testable import Notifications

/// A webhook endpoint in the test process: records every POST's body and answers the statuses
/// `answers` gives, one per request (the last one from then on).
final class WebhookEndpoint: Sendable {
    /// The requests so far and the answers to come.
    final class Log: Sendable {
        let state = Mutex<(bodies: [String], answers: [Int])>(([], []))
    }

    let port: Int
    private let log = Log()
    private let task: Task<Void, any Error>

    init(answers: [Int], port: Int? = nil) throws {
        let port = try port ?? unusedLoopbackPort()
        self.port = port
        log.state.withLock { $0.answers = answers }
        let router = Router()
        let log = self.log
        router.post("/hook") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let status = log.state.withLock { state -> Int in
                state.bodies.append(String(buffer: body))
                return state.answers.count > 1 ? state.answers.removeFirst() : state.answers.first ?? 200
            }
            return Response(status: .init(code: status))
        }
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        task = Task { try await application.runService() }
    }

    var url: String { "http://127.0.0.1:\(port)/hook" }
    var bodies: [String] { log.state.withLock { $0.bodies } }
    func answer(_ answers: [Int]) { log.state.withLock { $0.answers = answers } }

    /// The signedPayload of every POST, in order.
    var payloads: [String] {
        bodies.compactMap { body in (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])?["signedPayload"] as? String }
    }

    func stop() async {
        task.cancel()
        _ = await task.result
    }
}

/// Webhooks: each notification POSTed as Apple does, retried on Apple's schedule (shortened in
/// tests), durable across a kill, every attempt recorded.
@Suite(.serialized)
struct WebhookTests {
    static func history(_ server: StoreConnection) async throws -> [Storebus_Notifications_V1_NotificationHistoryItem] {
        try await server.call(Storebus_Notifications_V1_Notifications.getNotificationHistory, .with { $0.limit = 100 }).items
    }

    @Test("an endpoint answering 500 twice, then 200, receives the notification three times and never after; the history shows two failures and a SUCCESS")
    func retriedUntilSuccess() async throws {
        let endpoint = try WebhookEndpoint(answers: [500, 500, 200])
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            let server = try cluster.server()
            let set = try await admin.call(
                Storebus_Notifications_V1_Notifications.setWebhook,
                .with {
                    $0.appBundleID = puzzle
                    $0.url = endpoint.url
                })
            #expect(set.url == endpoint.url)
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "wes"))
            guard case .success = try await queue.purchase(Payment(productIdentifier: coins)) else { Issue.record("not purchased"); return }
            #expect(await waitUntil(timeout: .seconds(30)) { endpoint.bodies.count >= 3 })
            try await Task.sleep(for: .seconds(2))
            #expect(endpoint.bodies.count == 3, "nothing after the success")
            let notification = try #require(try await server.call(Storebus_Notifications_V1_Notifications.readNotifications, .init()).notifications.first)
            #expect(endpoint.payloads == Array(repeating: notification.signedPayload, count: 3), "{\"signedPayload\": …}, the notification as signed")
            let item = try #require(try await Self.history(server).first)
            #expect(item.webhookURL == endpoint.url && item.deliveryState == "SUCCEEDED")
            #expect(item.sendAttempts.map(\.sendAttemptResult) == ["UNSUCCESSFUL_HTTP_RESPONSE_CODE", "UNSUCCESSFUL_HTTP_RESPONSE_CODE", "SUCCESS"])
            #expect(item.sendAttempts.map(\.httpStatusCode) == [500, 500, 200])
            // A URL that is not http(s) is refused; a device session may not set one.
            await #expect(throws: StoreError.self) {
                _ = try await admin.call(
                    Storebus_Notifications_V1_Notifications.setWebhook,
                    .with {
                        $0.appBundleID = puzzle; $0.url = "ftp://example.com/x"
                    })
            }
            await queue.close()
            await server.close()
            await admin.close()
        }
        await endpoint.stop()
    }

    @Test("nobody listening: attempts fail NO_RESPONSE; the notification service killed with retries pending delivers each after its restart, once the endpoint answers")
    func durableRetries() async throws {
        let port = try unusedLoopbackPort()
        // At info: each failed attempt's error is in the notification service's log, shown below.
        try await StoreCluster(logLevel: "info", gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            let server = try cluster.server()
            _ = try await admin.call(
                Storebus_Notifications_V1_Notifications.setWebhook,
                .with {
                    $0.appBundleID = puzzle; $0.url = "http://127.0.0.1:\(port)/hook"
                })
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "val"))
            for _ in 0..<3 {
                guard case .success = try await queue.purchase(Payment(productIdentifier: coins)) else { Issue.record("not purchased"); return }
            }
            #expect(
                await waitUntil(timeout: .seconds(30)) {
                    let items = (try? await Self.history(server)) ?? []
                    return items.count == 3 && items.allSatisfy { $0.sendAttempts.count >= 2 }
                })
            let failed = try await Self.history(server)
            #expect(
                failed.allSatisfy { $0.deliveryState == "PENDING" && $0.sendAttempts.allSatisfy { $0.sendAttemptResult == "NO_RESPONSE" } },
                "\(failed)\n\(cluster.notifications.output.suffix(6000))")
            cluster.notifications.signal(SIGKILL)
            _ = await cluster.notifications.waitForExit(timeout: .seconds(10))
            let endpoint = try WebhookEndpoint(answers: [200], port: port)
            try await cluster.startNotifications()
            #expect(await waitUntil(timeout: .seconds(60)) { Set(endpoint.payloads).count == 3 }, "\(cluster.notifications.output.suffix(6000))")
            #expect(
                await waitUntil(timeout: .seconds(10)) {
                    ((try? await Self.history(server)) ?? []).allSatisfy { $0.deliveryState == "SUCCEEDED" && $0.sendAttempts.last?.sendAttemptResult == "SUCCESS" }
                })
            try await Task.sleep(for: .seconds(1))
            #expect(endpoint.payloads.count == 3, "each once: \(endpoint.payloads.count)")
            await endpoint.stop()
            await queue.close()
            await server.close()
            await admin.close()
        }
    }

    @Test("an endpoint that hangs with 300 deliveries queued holds back no other: a notification for another URL queued after them is delivered at once")
    func hangingEndpointHoldsBackNone() async throws {
        let directory = try TemporaryDirectory(prefix: "hang")
        defer { directory.remove() }
        // An endpoint that does not answer until the test lets it. Its requests are answered before
        // anything is stopped: a connection closed (by the sender's cancelled client, or the
        // server's shutdown) under a handler still waiting left its response writer unfinished,
        // which NIO's NIOAsyncWriter stops the process for (seen once in a full run).
        let hangingPort = try unusedLoopbackPort()
        let gate = Gate()
        let router = Router()
        router.post("/hook") { request, _ -> HTTPResponse.Status in
            _ = try await request.body.collect(upTo: 1 << 20)
            gate.entered()
            while !gate.isOpen { try await Task.sleep(for: .milliseconds(20)) }
            gate.answered()
            return .ok
        }
        let hanging = Task { try await Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: hangingPort))).runService() }
        let healthy = try WebhookEndpoint(answers: [200])
        let database = try StoreDatabase(directory: directory.url, name: "notifications", durability: .normal, migrator: NotificationsSchema.migrator)
        let hangingURL = "http://127.0.0.1:\(hangingPort)/hook"
        let store = NotificationStore(database: database, webhooks: ["com.example.hangs": hangingURL, puzzle: healthy.url])
        for index in 0..<300 {
            _ = try await store.append(
                .with {
                    $0.notificationUuid = "h\(index)"; $0.notificationType = "TEST"; $0.signedPayload = "x"; $0.appBundleID = "com.example.hangs"
                })
        }
        _ = try await store.append(
            .with {
                $0.notificationUuid = "ok"; $0.notificationType = "TEST"; $0.signedPayload = "healthy"; $0.appBundleID = puzzle
            })
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let sender = WebhookSender(store: store, client: client, timeout: .seconds(30), retryScale: 1, perURL: 4, logger: Logger(label: "test.webhooks"))
        let sending = Task { try await sender.run() }
        #expect(await waitUntil(timeout: .seconds(20)) { healthy.payloads == ["healthy"] }, "the healthy endpoint got \(healthy.payloads)")
        #expect(gate.answeredCount == 0, "the hanging endpoint answered \(gate.answeredCount)")
        // Then the hanging endpoint answers everything it was sent, and only then does anything stop.
        gate.open()
        #expect(await waitUntil(timeout: .seconds(60)) { gate.answeredCount >= 300 }, "answered \(gate.answeredCount) of 300")
        _ = await waitUntil(timeout: .seconds(10)) { gate.waiting == 0 }
        sending.cancel()
        _ = await sending.result
        // (The sender shuts its client down as it ends.)
        hanging.cancel()
        _ = await hanging.result
        await healthy.stop()
        try database.close()
    }

    /// What holds the hanging endpoint's answers back, and counts them.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiting: Int, answered: Int)>((false, 0, 0))
        var isOpen: Bool { state.withLock { $0.open } }
        var waiting: Int { state.withLock { $0.waiting } }
        var answeredCount: Int { state.withLock { $0.answered } }
        func open() { state.withLock { $0.open = true } }
        func entered() { state.withLock { $0.waiting += 1 } }
        func answered() {
            state.withLock {
                $0.waiting -= 1
                $0.answered += 1
            }
        }
    }

    @Test("without a configured scale, retries run on the app's store clock: a month of 30 s makes Apple's 1 and 12 hours about 42 ms and 0.5 s")
    func retriesOnTheStoreClock() async throws {
        let endpoint = try WebhookEndpoint(answers: [500, 500, 200])
        try await StoreCluster(gatewayCount: 1, webhookRetryScale: nil).running { cluster in
            let admin = try cluster.admin()
            let server = try cluster.server()
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
                .with {
                    $0.appBundleID = puzzle; $0.rate = .monthlyRenewalEveryThirtySeconds
                })
            _ = try await admin.call(
                Storebus_Notifications_V1_Notifications.setWebhook,
                .with {
                    $0.appBundleID = puzzle; $0.url = endpoint.url
                })
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "xia"))
            guard case .success = try await queue.purchase(Payment(productIdentifier: coins)) else { Issue.record("not purchased"); return }
            // Apple's 1 and 12 hours are 4.5 and 54 days at that clock; in real time, minutes at most.
            #expect(await waitUntil(timeout: .seconds(60)) { endpoint.bodies.count >= 3 }, "\(endpoint.bodies.count) POSTs")
            // The third attempt is recorded just after its answer came: wait for its record too.
            _ = await waitUntil(timeout: .seconds(30)) { ((try? await Self.history(server).first)?.sendAttempts.count ?? 0) >= 3 }
            let item = try #require(try await Self.history(server).first)
            let dates = item.sendAttempts.map(\.attemptDate.milliseconds)
            try #require(dates.count == 3, "\(item)")
            // Never sooner than the schedule says (1 h = 41.7 ms, 12 h = 500 ms at this clock).
            #expect(dates[1] - dates[0] >= 41 && dates[2] - dates[1] >= 500, "\(dates)")
            #expect(item.deliveryState == "SUCCEEDED")
            await queue.close()
            await server.close()
            await admin.close()
        }
        await endpoint.stop()
    }
}
