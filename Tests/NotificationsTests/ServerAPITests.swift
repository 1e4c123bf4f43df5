import Crypto
import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// The App Store Server API over HTTP, called by Apple's own AppStoreServerAPIClient (PyPI) with
/// its base URL pointed at the notification service, against real processes.
@Suite(.serialized)
struct ServerAPITests {
    static let monthly = "com.storebus.demo.puzzle.premium.monthly"
    static let group = "puzzle.premium"

    /// Runs scripts/apple-server-api-check.py with `calls`, signing with `keyFile` as `keyID`;
    /// one decoded line per call.
    static func apple(
        _ cluster: StoreCluster, root: String, keyFile: String? = nil, keyID: String = serverAPIKeyID, issuer: String = serverAPIIssuerID,
        app: String = puzzle, _ calls: [String]
    ) async throws -> [[String: Any]] {
        let python = deployDirectory.deletingLastPathComponent().appendingPathComponent(".build/python-tools/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "make test-deps installs Apple's library into .build/python-tools")
        let script = deployDirectory.deletingLastPathComponent().appendingPathComponent("scripts/apple-server-api-check.py").path
        let result = try await runCommand(
            python, [script, cluster.serverAPIURL, keyFile ?? cluster.serverAPIKeyFile, keyID, issuer, app, root] + calls)
        let lines = result.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        try #require(lines.count == calls.count, "the script said: \(result.output)")
        return lines
    }

    static func ids(_ line: [String: Any]) -> [String] {
        (line["transactions"] as? [[String: Any]] ?? []).compactMap { $0["transactionId"] as? String }
    }

    @Test(
        "Apple's AppStoreServerAPIClient: transaction info, history (versions 1 and 2), refunds, subscription statuses, an extension made once per request, a test notification and the notification history, every signed item verified; 401 for keys StoreBus does not know"
    )
    func appleClient() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            let server = try cluster.server()
            let (phone, _) = try await cluster.launch(account: "olga")
            guard case .success(let firstCoins) = try await phone.purchase(Payment(productIdentifier: coins)) else { Issue.record("coins"); return }
            #expect(try await phone.finish(firstCoins) == false, "finished now, not before")
            guard case .success(let secondCoins) = try await phone.purchase(Payment(productIdentifier: coins)) else { Issue.record("coins"); return }
            guard case .success(let pack) = try await phone.purchase(Payment(productIdentifier: levelPack)) else { Issue.record("pack"); return }
            guard case .success(let subscribed) = try await phone.purchase(Payment(productIdentifier: Self.monthly)) else { Issue.record("monthly"); return }
            let renewed = try await admin.call(Storebus_PaymentQueue_V1_Subscriptions.renewNow, NotificationsEndToEndTests.subscription("olga"))
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
                .with {
                    $0.transactionIdentifier = pack.id
                    $0.revocationReason = .appIssue
                })
            // Two charges, a subscription, a renewal and a refund: once their notifications are
            // signed, the receipt service has applied all of it.
            let notifications = try await NotificationsEndToEndTests.read(server, count: 6)
            try #require(notifications.count == 6)
            let renewalID = try #require(notifications[4].transactionID.isEmpty ? nil : notifications[4].transactionID)
            #expect(renewed.subscription.originalTransactionIdentifier == subscribed.id)

            let work = try TemporaryDirectory(prefix: "api")
            defer { work.remove() }
            let pem = try await phone.connection.rootCertificatePEM()
            let der = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            let root = work.path("root.der")
            try Data(try #require(Data(base64Encoded: der))).write(to: URL(fileURLWithPath: root))
            let started = EpochMilliseconds.of(Date()) - 600_000

            let lines = try await Self.apple(
                cluster, root: root,
                [
                    "info=\(secondCoins.id)", "history=\(firstCoins.id)", "history_v1=\(renewalID)", "refunds=\(subscribed.id)", "statuses=\(pack.id)",
                    "test=", "notifications=\(started)", "info=999999999"
                ])
            let (info, history, historyV1, refunds, statuses, test, history2, unknown) = (
                lines[0], lines[1], lines[2], lines[3], lines[4], lines[5], lines[6], lines[7]
            )
            let transaction = try #require(info["transaction"] as? [String: Any], "\(info)")
            #expect(transaction["transactionId"] as? String == secondCoins.id && transaction["productId"] as? String == coins)
            #expect(transaction["type"] as? String == "Consumable" && transaction["environment"] as? String == "Sandbox")

            // Version 2: every charge, oldest first; version 1 leaves out the finished consumable.
            let all = [firstCoins.id, secondCoins.id, pack.id, subscribed.id, renewalID]
            #expect(Self.ids(history) == all, "\(history)")
            #expect(history["bundleId"] as? String == puzzle && history["environment"] as? String == "Sandbox")
            #expect(Self.ids(historyV1) == Array(all.dropFirst()), "\(historyV1)")
            let refunded = refunds["transactions"] as? [[String: Any]] ?? []
            #expect(Self.ids(refunds) == [pack.id] && refunded.first?["revocationReason"] as? Int == 1, "\(refunds)")

            let groups = try #require(statuses["groups"] as? [[String: Any]], "\(statuses)")
            #expect(groups.count == 1 && groups.first?["subscriptionGroupIdentifier"] as? String == Self.group)
            let item = try #require((groups.first?["lastTransactions"] as? [[String: Any]])?.first)
            #expect(item["status"] as? Int == 1 && item["originalTransactionId"] as? String == subscribed.id)
            #expect((item["transaction"] as? [String: Any])?["transactionId"] as? String == renewalID)
            #expect((item["renewal"] as? [String: Any])?["autoRenewProductId"] as? String == Self.monthly)

            let testNotification = try #require(test["notification"] as? [String: Any], "\(test)")
            #expect(testNotification["notificationType"] as? String == "TEST" && testNotification["notificationUUID"] as? String == test["token"] as? String)

            // The notification history: the six notifications and the TEST, in order, verified.
            let items = try #require(history2["notifications"] as? [[String: Any]], "\(history2)")
            let types = items.compactMap { ($0["notification"] as? [String: Any])?["notificationType"] as? String }
            #expect(types == notifications.map(\.notificationType) + ["TEST"], "\(types)")

            #expect(unknown["ok"] as? Bool == false && unknown["status"] as? Int == 404 && unknown["errorCode"] as? Int == 4_040_010, "\(unknown)")

            // Extend a Subscription Renewal Date: once per request identifier; the period's end
            // moves later, and a retry of the same request moves it no further.
            let renewalInfo = try #require(item["transaction"] as? [String: Any])
            let expiresBefore = try #require(renewalInfo["expiresDate"] as? Int)
            let extensions = try await Self.apple(
                cluster, root: root,
                [
                    "extend=\(subscribed.id):retry-safe-1:3", "extend=\(subscribed.id):retry-safe-1:3", "extend=\(pack.id):other:3",
                    "extend=\(subscribed.id):bad-days:91"
                ])
            let first = try #require(extensions[0]["extended"] as? [String: Any], "\(extensions[0])")
            let again = try #require(extensions[1]["extended"] as? [String: Any], "\(extensions[1])")
            let effective = try #require(first["effectiveDate"] as? Int)
            #expect(first["success"] as? Bool == true && first["originalTransactionId"] as? String == subscribed.id && effective > expiresBefore)
            #expect(again["effectiveDate"] as? Int == effective, "a retry extends no further")
            #expect(extensions[2]["status"] as? Int == 404 && extensions[2]["errorCode"] as? Int == 4_040_005, "\(extensions[2])")
            #expect(extensions[3]["status"] as? Int == 400 && extensions[3]["errorCode"] as? Int == 4_000_009, "\(extensions[3])")
            // The receipt service follows the payment queue's log: its statuses say so once it has
            // applied the extension.
            var seen: Int?
            for _ in 0..<20 where seen != effective {
                let after = try await Self.apple(cluster, root: root, ["statuses=\(subscribed.id)"])
                let item = ((after.first?["groups"] as? [[String: Any]])?.first?["lastTransactions"] as? [[String: Any]])?.first
                seen = (item?["transaction"] as? [String: Any])?["expiresDate"] as? Int
                if seen != effective { try await Task.sleep(for: .milliseconds(250)) }
            }
            #expect(seen == effective, "the statuses' period end")

            // Keys StoreBus does not know: another private key under the known key id, an unknown
            // key id, the known key for an app it does not act for.
            let stranger = work.path("stranger.p8")
            try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: stranger))
            let refused = try await Self.apple(cluster, root: root, keyFile: stranger, ["info=\(pack.id)"])
            #expect(refused.first?["ok"] as? Bool == false && refused.first?["status"] as? Int == 401, "\(refused)")
            let unknownKey = try await Self.apple(cluster, root: root, keyID: "NOSUCHKEY1", ["history=\(pack.id)"])
            #expect(unknownKey.first?["status"] as? Int == 401, "\(unknownKey)")
            let otherIssuer = try await Self.apple(cluster, root: root, issuer: "00000000-0000-0000-0000-000000000000", ["info=\(pack.id)"])
            #expect(otherIssuer.first?["status"] as? Int == 401, "\(otherIssuer)")
            let otherApp = try await Self.apple(cluster, root: root, app: "com.storebus.demo.notes", ["info=\(pack.id)"])
            #expect(otherApp.first?["status"] as? Int == 401, "\(otherApp)")
            await phone.close()
            await server.close()
            await admin.close()
        }
    }

    @Test("the bus answers the same: a server session reads its app's transactions by id; another app's session is refused")
    func overTheBus() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let server = try cluster.server()
            let (phone, _) = try await cluster.launch(account: "pavel")
            guard case .success(let pack) = try await phone.purchase(Payment(productIdentifier: levelPack)) else { Issue.record("pack"); return }
            _ = try await NotificationsEndToEndTests.read(server, count: 1)
            let info = try await server.call(Storebus_Receipt_V1_Receipt.getTransactionInfo, .with { $0.transactionID = pack.id })
            #expect(!info.signedTransactionInfo.isEmpty)
            let history = try await server.call(Storebus_Receipt_V1_Receipt.getTransactionHistory, .with { $0.transactionID = pack.id })
            #expect(history.signedTransactions.count == 1 && !history.hasMore_p && history.bundleID == puzzle)
            let missing = await NotificationsEndToEndTests.refusal {
                _ = try await server.call(Storebus_Receipt_V1_Receipt.getTransactionInfo, .with { $0.transactionID = "424242" })
            }
            #expect(missing?.0 == .notFound)
            let other = await NotificationsEndToEndTests.refusal {
                _ = try await server.call(
                    Storebus_Receipt_V1_Receipt.getTransactionInfo,
                    .with {
                        $0.appBundleID = "com.storebus.demo.notes"; $0.transactionID = pack.id
                    })
            }
            #expect(other?.0 == .permissionDenied && other?.1 == "OTHER_APP")
            let device = await NotificationsEndToEndTests.refusal {
                _ = try await phone.connection.call(Storebus_Receipt_V1_Receipt.getTransactionInfo, .with { $0.transactionID = pack.id })
            }
            #expect(device?.0 == .permissionDenied && device?.1 == "SERVER_REQUIRED")
            await phone.close()
            await server.close()
        }
    }
}
