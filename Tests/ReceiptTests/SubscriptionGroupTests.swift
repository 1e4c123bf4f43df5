import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// A `.storekit` file's subscription group, imported with storectl and served by a deployment of
/// real processes: its levels (groupNumber) make upgrades and downgrades.
@Suite(.serialized)
struct SubscriptionGroupTests {
    static let app = "com.example.game"
    static let monthly = "com.example.game.pass.monthly"
    static let yearly = "com.example.game.pass.yearly"
    /// A StoreKit configuration as Xcode writes one: a group whose monthly pass (groupNumber 1) is a
    /// level above its yearly pass (groupNumber 2).
    static let storeKit = #"""
        {
          "identifier" : "A1B2C3D4",
          "nonRenewingSubscriptions" : [ ],
          "products" : [ ],
          "settings" : { "_locale" : "en_US", "_storefront" : "USA" },
          "subscriptionGroups" : [
            {
              "id" : "21400001", "name" : "Game Pass", "localizations" : [ ],
              "subscriptions" : [
                {
                  "displayPrice" : "2.99", "familyShareable" : false, "groupNumber" : 1, "internalID" : "6443000010",
                  "localizations" : [ { "description" : "Every world, monthly", "displayName" : "Game Pass Monthly", "locale" : "en_US" } ],
                  "productID" : "com.example.game.pass.monthly", "recurringSubscriptionPeriod" : "P1M",
                  "referenceName" : "Pass Monthly", "subscriptionGroupID" : "21400001", "type" : "RecurringSubscription"
                },
                {
                  "displayPrice" : "24.99", "familyShareable" : false, "groupNumber" : 2, "internalID" : "6443000011",
                  "localizations" : [ { "description" : "Every world, yearly", "displayName" : "Game Pass Yearly", "locale" : "en_US" } ],
                  "productID" : "com.example.game.pass.yearly", "recurringSubscriptionPeriod" : "P1Y",
                  "referenceName" : "Pass Yearly", "subscriptionGroupID" : "21400001", "type" : "RecurringSubscription"
                }
              ]
            }
          ],
          "version" : { "major" : 4, "minor" : 0 }
        }
        """#

    @Test(
        "a .storekit subscription group imported with storectl: buying the higher level upgrades at once (the old period cancelled, upgraded, refunded pro rata); the lower level waits for the renewal, which is then of it"
    )
    func upgradeAndDowngrade() async throws {
        let work = try TemporaryDirectory(prefix: "skgroup")
        defer { work.remove() }
        try Data(Self.storeKit.utf8).write(to: work.url.appendingPathComponent("game.storekit"))
        let catalogPath = work.path("catalog.json")
        let imported = try await runCommand(
            try Executables.url("storectl").path, ["catalog", "import", work.path("game.storekit"), "--app", Self.app, "-o", catalogPath])
        try #require(imported.status == 0, "storectl catalog import: \(imported.output)")

        try await StoreCluster(gatewayCount: 1, catalogPath: catalogPath, appKeyApps: [Self.app]).running { cluster in
            let admin = try cluster.admin()
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
                .with {
                    $0.appBundleID = Self.app
                    $0.rate = .monthlyRenewalEveryThirtySeconds
                })
            let phone = try PaymentQueue(configuration: cluster.configuration(account: "gina", app: Self.app))
            let recorder = Recorder(phone)
            #expect(await recorder.attached())
            // The yearly pass, then the monthly one, a level above: an upgrade, at once.
            let yearly = try await phone.addPayment(Payment(productIdentifier: Self.yearly))
            #expect(await recorder.purchased(yearly.id))
            let monthly = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
            #expect(await recorder.purchased(monthly.id))
            let history = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
                .with {
                    $0.appBundleID = Self.app
                    $0.accountID = "gina"
                    $0.includeFinished = true
                }
            ).transactions
            let replaced = try #require(history.first { $0.transactionIdentifier == yearly.id })
            #expect(replaced.isUpgraded && replaced.hasCancellationDate)
            let upgraded = try #require(history.first { $0.transactionIdentifier == monthly.id })
            #expect(upgraded.originalTransactionID == yearly.id && upgraded.transactionDate == replaced.cancellationDate)
            let charges = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                .with {
                    $0.appBundleID = Self.app
                    $0.accountID = "gina"
                }
            ).charges
            #expect(charges.map(\.amount) == ["24.99", "2.99"])
            let refunded = try #require(Decimal(string: charges[0].refundedAmount), "the yearly charge is refunded pro rata: \(charges[0])")
            // Replaced moments into a six-minute year: nearly all of it unused.
            #expect(refunded > 24 && refunded <= 24.99, "\(refunded)")

            // The yearly pass again, a level below: a downgrade, at the next renewal.
            let back = try await phone.addPayment(Payment(productIdentifier: Self.yearly))
            #expect(await recorder.purchased(back.id))
            let planned = try #require(
                try await admin.call(
                    Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
                    .with {
                        $0.appBundleID = Self.app
                        $0.accountID = "gina"
                    }
                ).subscriptions.first)
            #expect(planned.productIdentifier == Self.monthly && planned.autoRenewProductIdentifier == Self.yearly)
            #expect(
                try await admin.call(
                    Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
                    .with {
                        $0.appBundleID = Self.app; $0.accountID = "gina"
                    }
                ).charges.count == 2)
            let renewed = await recorder.wait(timeout: .seconds(120)) { recorder in
                recorder.live.contains { callback in
                    guard case .updatedTransactions(let transactions, false) = callback.event else { return false }
                    return transactions.contains { $0.rawRecord.transactionReason == .renewal && $0.payment.productIdentifier == Self.yearly }
                }
            }
            #expect(renewed, "the renewal is of the yearly pass")
            recorder.cancel()
            await phone.close()
            await admin.close()
        }
    }

    @Test("storectl: the admin sets the clock and billing, a device lists its subscriptions as a person reads them, renew-now, extend and expire-now")
    func storectl() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            func run(_ arguments: [String], _ name: String) async throws -> String {
                let (status, output) = try await ReceiptClientTests.storectl(cluster, arguments, name: name)
                #expect(status == 0, "storectl \(arguments.joined(separator: " ")): \(output)")
                return output
            }
            #expect(try await run(["admin", "subscription", "rate", "monthly-every-30-minutes"], "rate").contains("renews at monthly-every-30-minutes"))
            #expect(try await run(["admin", "subscription", "billing", "--no-fail-renewals", "--grace"], "billing").contains("renewal charges succeed, grace period on"))
            let (phone, recorder) = try await cluster.launch(account: "sid")
            let bought = try await phone.addPayment(Payment(productIdentifier: ReceiptVerificationTests.monthly))
            #expect(await recorder.purchased(bought.id))
            let listed = try await run(["subscriptions", "--account", "sid"], "list")
            #expect(listed.contains("puzzle.premium  \(ReceiptVerificationTests.monthly)  renews on "), "\(listed)")
            let renewed = try await run(["admin", "subscription", "renew-now", "--account", "sid", "--group", "puzzle.premium"], "renew")
            #expect(renewed.contains("1 renewals"), "\(renewed)")
            #expect(try await run(["admin", "subscription", "extend", "--account", "sid", "--group", "puzzle.premium", "--days", "3", "--reason", "1"], "extend").contains("renews on "))
            let expired = try await run(["admin", "subscription", "expire-now", "--account", "sid", "--group", "puzzle.premium"], "expire")
            #expect(expired.contains("expired on ") && expired.contains("auto-renew turned off"), "\(expired)")
            let refused = try await ReceiptClientTests.storectl(cluster, ["admin", "subscription", "renew-now", "--account", "sid", "--group", "puzzle.premium"], name: "refused")
            #expect(refused.status != 0 && refused.output.contains("has ended"), "\(refused.output)")
            recorder.cancel()
            await phone.close()
        }
    }
}
