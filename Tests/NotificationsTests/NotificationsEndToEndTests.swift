import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// The notification service as a backend sees it: real processes, through a gateway, with the app's
/// server key; Apple's own library verifies what it is given.
@Suite(.serialized)
struct NotificationsEndToEndTests {
    static let monthly = "com.storebus.demo.puzzle.premium.monthly"
    static let group = "puzzle.premium"

    /// Every notification of the app after `position`, read page by page until `count` have come
    /// (waiting for them), or the wait ends.
    static func read(_ server: StoreConnection, after position: UInt64 = 0, count: Int, timeout: Duration = .seconds(30)) async throws -> [Storebus_Notifications_V1_Notification] {
        var notifications: [Storebus_Notifications_V1_Notification] = []
        var last = position
        let deadline = ContinuousClock.now + timeout
        while notifications.count < count && ContinuousClock.now < deadline {
            let page = try await server.call(
                Storebus_Notifications_V1_Notifications.readNotifications,
                .with {
                    $0.afterPosition = last
                    $0.waitMs = 1_000
                    $0.limit = 3
                })
            notifications += page.notifications
            last = page.notifications.last?.position ?? last
        }
        return notifications
    }

    static func subscription(_ account: String) -> Storebus_PaymentQueue_V1_SubscriptionRef {
        .with {
            $0.appBundleID = puzzle
            $0.accountID = account
            $0.subscriptionGroupIdentifier = group
        }
    }

    /// The status a call failed with and its reason.
    static func refusal(_ call: () async throws -> Void) async -> (StatusCode, String)? {
        do {
            try await call()
            return nil
        } catch let error as StoreError {
            return (error.status, error.reason)
        } catch {
            return (.unknown, "\(error)")
        }
    }

    @Test(
        "a purchase, a refund, a subscription bought, renewed, turned off and expired: one notification each, in order, gapless, each verified by Apple's library; a TEST on request; a server key sees its app's stream alone"
    )
    func lifecycle() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            let server = try cluster.server()
            let (phone, recorder) = try await cluster.launch(account: "nina")
            guard case .success(let coinsBought) = try await phone.purchase(Payment(productIdentifier: coins)) else { Issue.record("coins"); return }
            guard case .success(let packBought) = try await phone.purchase(Payment(productIdentifier: levelPack)) else { Issue.record("pack"); return }
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
                .with {
                    $0.transactionIdentifier = packBought.id
                    $0.revocationReason = .appIssue
                })
            guard case .success(let subscribed) = try await phone.purchase(Payment(productIdentifier: Self.monthly)) else { Issue.record("monthly"); return }
            _ = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.renewNow, Self.subscription("nina"))
            #expect(
                await recorder.wait {
                    $0.live.contains { callback in
                        if case .updatedTransactions(let transactions, false) = callback.event { return transactions.contains(where: \.isRenewal) }
                        return false
                    }
                })
            try await phone.connection.setAutoRenew(false, group: Self.group)
            _ = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.expireNow, Self.subscription("nina"))

            let notifications = try await Self.read(server, count: 7)
            let kinds = notifications.map { $0.subtype.isEmpty ? $0.notificationType : "\($0.notificationType)/\($0.subtype)" }
            #expect(
                kinds == [
                    "ONE_TIME_CHARGE", "ONE_TIME_CHARGE", "REFUND", "SUBSCRIBED/INITIAL_BUY", "DID_RENEW", "DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED",
                    "EXPIRED/VOLUNTARY"
                ])
            #expect(notifications.map(\.position) == Array(1...UInt64(notifications.count)), "gapless from 1")
            #expect(Set(notifications.map(\.notificationUuid)).count == notifications.count)
            #expect(notifications.prefix(3).map(\.transactionID) == [coinsBought.id, packBought.id, packBought.id])
            #expect(notifications.dropFirst(3).allSatisfy { $0.originalTransactionID == subscribed.id && $0.accountID == "nina" })
            // Nothing more comes, and nothing comes twice: from the last position, an empty page.
            let after = try await server.call(
                Storebus_Notifications_V1_Notifications.readNotifications,
                .with {
                    $0.afterPosition = 7; $0.waitMs = 300
                })
            #expect(after.notifications.isEmpty && after.headPosition == 7)
            let resumed = try await Self.read(server, after: 3, count: 4)
            #expect(resumed.map(\.notificationUuid) == notifications.dropFirst(3).map(\.notificationUuid), "resumed from a kept position")
            #expect(await Self.refusal { _ = try await server.call(Storebus_Notifications_V1_Notifications.readNotifications, .with { $0.afterPosition = 8 }) }?.0 == .outOfRange)

            let test = try await server.call(Storebus_Notifications_V1_Notifications.requestTestNotification, .init())
            let testNotification = try #require(try await Self.read(server, after: 7, count: 1).first)
            #expect(test.position == 8 && testNotification.notificationUuid == test.testNotificationToken && testNotification.notificationType == "TEST")

            // Apple's library: every notification verifies with StoreBus's root, its transaction and
            // renewal info too; a changed byte does not.
            let python = deployDirectory.deletingLastPathComponent().appendingPathComponent(".build/python-tools/bin/python").path
            try #require(FileManager.default.isExecutableFile(atPath: python), "make test-deps installs Apple's library into .build/python-tools")
            let work = try TemporaryDirectory(prefix: "ntf")
            defer { work.remove() }
            let root = try await phone.connection.rootCertificatePEM()
            let der = root.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            try Data(try #require(Data(base64Encoded: der))).write(to: URL(fileURLWithPath: work.path("root.der")))
            var tampered = Array(notifications[0].signedPayload)
            let middle = tampered.firstIndex(of: ".").map { $0 + 10 } ?? 10
            tampered[middle] = tampered[middle] == "A" ? "B" : "A"
            let payloads = (notifications + [testNotification]).map(\.signedPayload) + [String(tampered)]
            let script = deployDirectory.deletingLastPathComponent().appendingPathComponent("scripts/apple-library-check.py").path
            let result = try await runCommand(python, [script, work.path("root.der"), puzzle] + payloads.flatMap { ["--notification", $0] })
            let lines = result.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            try #require(lines.count == payloads.count, "the script said: \(result.output)")
            for (index, notification) in (notifications + [testNotification]).enumerated() {
                let payload = try #require(lines[index]["payload"] as? [String: Any], "\(notification.notificationType): \(lines[index])")
                #expect(payload["notificationType"] as? String == notification.notificationType)
                #expect((payload["subtype"] as? String ?? "") == notification.subtype)
                #expect(payload["notificationUUID"] as? String == notification.notificationUuid && payload["version"] as? String == "2.0")
                let data = try #require(payload["data"] as? [String: Any])
                #expect(data["bundleId"] as? String == puzzle && data["environment"] as? String == "Sandbox")
                let transaction = payload["transaction"] as? [String: Any]
                #expect(transaction?["transactionId"] as? String == (notification.transactionID.isEmpty ? nil : notification.transactionID))
                let isSubscription = index >= 3 && index < 7
                #expect((payload["renewal"] as? [String: Any])?["originalTransactionId"] as? String == (isSubscription ? subscribed.id : nil))
                if isSubscription { #expect(data["status"] != nil) }
            }
            #expect(lines.last?["ok"] as? Bool == false, "a changed byte: \(String(describing: lines.last))")

            // A server key acts for its app alone, on the server methods alone; a device's session
            // cannot read the stream.
            let other = await Self.refusal {
                _ = try await server.call(Storebus_Notifications_V1_Notifications.readNotifications, .with { $0.appBundleID = "com.storebus.demo.notes" })
            }
            #expect(other?.0 == .permissionDenied && other?.1 == "OTHER_APP")
            let device = await Self.refusal { _ = try await phone.connection.call(Storebus_Notifications_V1_Notifications.readNotifications, .init()) }
            #expect(device?.0 == .permissionDenied && device?.1 == "SERVER_REQUIRED")
            let deviceCall = await Self.refusal { _ = try await server.call(Storebus_PaymentQueue_V1_PaymentQueue.canMakePayments, .init()) }
            #expect(deviceCall?.0 == .permissionDenied && deviceCall?.1 == "DEVICE_SESSION_REQUIRED")
            await phone.close()
            await server.close()
            await admin.close()
        }
    }

    @Test("the notification service killed while purchases come in: after its restart every purchase has exactly one notification, gapless")
    func exactlyOnceAcrossKill() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let server = try cluster.server()
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "kim"))
            var bought: [String] = []
            for index in 0..<24 {
                if index == 12 {
                    await cluster.notifications.kill()
                    try await cluster.startNotifications()
                }
                guard case .success(let transaction) = try await queue.purchase(Payment(productIdentifier: coins)) else { continue }
                bought.append(transaction.id)
                try await queue.finish(transaction)
                if index == 5 { cluster.notifications.signal(SIGKILL) }
            }
            let notifications = try await Self.read(server, count: bought.count)
            #expect(notifications.map(\.transactionID) == bought)
            #expect(notifications.map(\.position) == Array(1...UInt64(bought.count)))
            #expect(Set(notifications.map(\.notificationUuid)).count == bought.count)
            let after = try await server.call(
                Storebus_Notifications_V1_Notifications.readNotifications,
                .with {
                    $0.afterPosition = UInt64(bought.count); $0.waitMs = 500
                })
            #expect(after.notifications.isEmpty, "none twice")
            await queue.close()
            await server.close()
        }
    }

    @Test("the SDK's NotificationStream and storectl notifications watch: verified notifications in order, resumed from a position, across a gateway restart")
    func sdkAndStorectl() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let queue = try PaymentQueue(configuration: cluster.configuration(account: "lee"))
            func buy() async throws -> String {
                guard case .success(let transaction) = try await queue.purchase(Payment(productIdentifier: coins)) else { throw ClusterFailure(description: "not purchased") }
                try await queue.finish(transaction)
                return transaction.id
            }
            var bought = [try await buy(), try await buy()]
            let server = try cluster.server()
            var seen: [VerifiedNotification] = []
            for try await notification in NotificationStream(connection: server) {
                seen.append(notification)
                if seen.count == 2 { break }
            }
            #expect(seen.map(\.position) == [1, 2] && seen.map(\.notificationType) == ["ONE_TIME_CHARGE", "ONE_TIME_CHARGE"])
            #expect(seen.map { $0.transaction?.transactionId } == bought && seen.allSatisfy { $0.accountIdentifier == "lee" && $0.renewalInfo == nil })

            // Waiting for the third while the gateway restarts: the stream waits it out.
            let waiting = Task {
                var iterator = NotificationStream(connection: server, after: 2, wait: .seconds(2)).makeAsyncIterator()
                return try await iterator.next()
            }
            try await Task.sleep(for: .milliseconds(200))
            await cluster.gateways[0].kill()
            try await cluster.startGateway(0)
            bought.append(try await buy())
            let third = try await waiting.value
            #expect(third?.position == 3 && third?.transaction?.transactionId == bought[2])

            let storectl = ServiceProcess(
                name: "storectl",
                arguments: ["notifications", "watch", "--gateway", cluster.gatewayEndpoints[0], "--app", puzzle, "--after", "1", "--count", "2"],
                logFile: cluster.directory.url.appendingPathComponent("storectl-watch.log"))
            try storectl.start(environment: ["STOREBUS_SERVER_KEY": serverKey])
            let status = await storectl.waitForExit(timeout: .seconds(60))
            let lines = storectl.output.split(separator: "\n").map(String.init).filter { $0.contains("ONE_TIME_CHARGE") }
            #expect(status == 0, "\(storectl.output)")
            #expect(lines.count == 2 && lines[0].hasPrefix("2 ONE_TIME_CHARGE ") && lines[1].hasPrefix("3 ONE_TIME_CHARGE "), "\(storectl.output)")
            #expect(lines.first?.contains("transaction=\(bought[1])") == true && lines.last?.contains("account=lee") == true, "\(storectl.output)")
            await queue.close()
            await server.close()
        }
    }
}
