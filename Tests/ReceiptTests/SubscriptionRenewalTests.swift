import Foundation
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

@testable import ReceiptFormat

/// Auto-renewable subscriptions through a whole deployment of real processes, on a store clock
/// renewing every two seconds.
@Suite(.serialized)
struct SubscriptionRenewalTests {
    static let monthly = ReceiptVerificationTests.monthly
    static let group = "puzzle.premium"

    /// The renewals a recorder heard live (not replayed), in the order they came.
    static func renewals(_ recorder: Recorder) -> [Storebus_PaymentQueue_V1_PaymentTransaction] {
        recorder.live.flatMap { callback -> [Storebus_PaymentQueue_V1_PaymentTransaction] in
            guard case .updatedTransactions(let transactions, false) = callback.event else { return [] }
            return transactions.map(\.rawRecord).filter { $0.transactionReason == .renewal && $0.transactionState == .purchased }
        }
    }

    static func subscription(_ admin: StoreConnection, account: String) async throws -> Storebus_PaymentQueue_V1_Subscription? {
        try await admin.call(
            Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = account
            }
        ).subscriptions.first { $0.subscriptionGroupIdentifier == group }
    }

    @Test(
        "a subscription renews every 2 s: each renewal reaches the observer once, purchased, its period starting where the last ended, across a payment-queue SIGKILL and a gateway restart; auto-renew off ends it (intent 1); the receipt lists every period"
    )
    func renewsThroughFailures() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            let rate = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
                .with {
                    $0.appBundleID = puzzle
                    $0.rate = .oneRenewalEveryTwoSeconds
                })
            #expect(rate.rate == .oneRenewalEveryTwoSeconds)
            let (phone, recorder) = try await cluster.launch(account: "sam")
            let bought = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
            #expect(await recorder.purchased(bought.id))
            #expect(await recorder.wait(timeout: .seconds(60)) { Self.renewals($0).count >= 2 })

            // The payment queue dies without warning, and stays down over a period's end: what came
            // due meanwhile renews when it is back, each period its own transaction.
            await cluster.queue.kill()
            try await Task.sleep(for: .seconds(3))
            try await cluster.startPaymentQueue()
            #expect(await recorder.wait(timeout: .seconds(60)) { Self.renewals($0).count >= 4 })
            // The gateway restarts; the device's stream resumes where it was.
            _ = await cluster.gateways[0].stop()
            try await cluster.startGateway(0)
            #expect(await recorder.wait(timeout: .seconds(60)) { Self.renewals($0).count >= 5 })

            // Auto-renew off: the period running is the last.
            let off = try await admin.call(
                Storebus_PaymentQueue_V1_Subscriptions.setAutoRenew,
                .with {
                    $0.appBundleID = puzzle
                    $0.accountID = "sam"
                    $0.subscriptionGroupIdentifier = Self.group
                    $0.autoRenewStatus = false
                })
            #expect(!off.subscription.autoRenewStatus)
            let ended = try await waitUntil(timeout: .seconds(60), interval: .milliseconds(100)) {
                try await Self.subscription(admin, account: "sam")?.status == .expired
            }
            #expect(ended)
            let subscription = try #require(try await Self.subscription(admin, account: "sam"))
            #expect(subscription.expirationIntent == 1)
            #expect(subscription.originalTransactionIdentifier == bought.id)

            // Every renewal the store made reached the device once, no more; the periods follow
            // each other without a gap or an overlap.
            let made = Int(subscription.renewalCount)
            #expect(await recorder.wait(timeout: .seconds(60)) { Self.renewals($0).count >= made })
            // A moment more, for a repeat to show if there were one.
            try await Task.sleep(for: .milliseconds(500))
            let heard = Self.renewals(recorder)
            #expect(heard.count == Int(subscription.renewalCount), "renewals made \(subscription.renewalCount), heard \(heard.count)")
            #expect(Set(heard.map(\.transactionIdentifier)).count == heard.count, "a renewal was heard twice")
            var previous = try #require(
                recorder.live.flatMap { callback -> [Storebus_PaymentQueue_V1_PaymentTransaction] in
                    guard case .updatedTransactions(let transactions, false) = callback.event else { return [] }
                    return transactions.map(\.rawRecord).filter { $0.transactionIdentifier == bought.id && $0.transactionState == .purchased }
                }.first)
            #expect(previous.transactionReason == .purchase && previous.hasExpiresDate)
            for renewal in heard.sorted(by: { $0.transactionIdentifier < $1.transactionIdentifier }) {
                #expect(renewal.transactionDate == previous.expiresDate, "\(renewal.transactionIdentifier) starts where \(previous.transactionIdentifier) ended")
                #expect(renewal.originalTransactionID == bought.id)
                previous = renewal
            }
            #expect(previous.transactionIdentifier == subscription.latestTransactionIdentifier)

            // The receipt holds every period: the purchase and each renewal, one original.
            let sam = try StoreConnection(configuration: cluster.configuration(account: "sam", gateways: [0]))
            let receipt = try await ReceiptFlowTests.receipt(sam) { receipt in
                receipt.inApp.filter { $0.productID == Self.monthly }.count == heard.count + 1
            }
            let periods = receipt.inApp.filter { $0.productID == Self.monthly }.sorted { $0.purchaseDate < $1.purchaseDate }
            #expect(periods.allSatisfy { $0.originalTransactionID == bought.id })
            // The product's free trial, once: the first period only.
            #expect(periods.first?.isTrialPeriod == true && periods.dropFirst().allSatisfy { !$0.isTrialPeriod })
            #expect(Set(periods.compactMap(\.webOrderLineItemID)).count == periods.count, "each period its own billing line")
            for (earlier, later) in zip(periods, periods.dropFirst()) {
                #expect(earlier.expiresDate == later.purchaseDate)
            }
            try await Self.checkSigned(cluster, sam: sam, original: bought.id, renewal: try #require(heard.last).transactionIdentifier)
            recorder.cancel()
            await sam.close()
            await phone.close()
            await admin.close()
        }
    }

    static func setRate(_ admin: StoreConnection, _ rate: Storebus_PaymentQueue_V1_RenewalRate) async throws {
        _ = try await admin.call(
            Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
            .with {
                $0.appBundleID = puzzle
                $0.rate = rate
            })
    }

    static func setBilling(_ admin: StoreConnection, retry: Bool, grace: Bool) async throws {
        _ = try await admin.call(
            Storebus_PaymentQueue_V1_Subscriptions.setBillingControls,
            .with {
                $0.appBundleID = puzzle
                $0.controls.billingRetryOnRenewal = retry
                $0.controls.gracePeriodEnabled = grace
            })
    }

    @Test(
        "billing retry through a deployment: in the grace period the customer stays entitled and receipts say so; once charges work the next retry renews, heard by the device; without recovery the subscription expires, intent 2"
    )
    func billingRetry() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let admin = try cluster.admin()
            // A month lasts 30 s and a grace period 16 s: long enough to look at in a busy machine.
            try await Self.setRate(admin, .monthlyRenewalEveryThirtySeconds)
            try await Self.setBilling(admin, retry: true, grace: true)
            let (phone, recorder) = try await cluster.launch(account: "rita")
            let bought = try await phone.addPayment(Payment(productIdentifier: Self.monthly))
            #expect(await recorder.purchased(bought.id))
            let inGrace = try await waitUntil(timeout: .seconds(90), interval: .milliseconds(50)) {
                try await Self.subscription(admin, account: "rita")?.status == .gracePeriod
            }
            #expect(inGrace)
            let rita = try StoreConnection(configuration: cluster.configuration(account: "rita", gateways: [0]))
            // The receipt service follows the payment queue's log: it hears of the grace period a
            // moment after the payment queue says so.
            func entitlement() async throws -> Storebus_Receipt_V1_Entitlement? {
                try await rita.call(Storebus_Receipt_V1_Receipt.getEntitlements, .init()).entitlements.first { $0.productIdentifier == Self.monthly }
            }
            #expect(try await waitUntil(timeout: .seconds(30)) { try await entitlement()?.reason.hasPrefix("in the billing grace period") == true })
            let inGracePeriod = try #require(try await entitlement())
            #expect(inGracePeriod.active && inGracePeriod.reason.hasPrefix("in the billing grace period until "), "\(inGracePeriod.reason)")
            let receiptData = try await rita.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .init()).receiptData
            let verified = try await rita.call(
                Storebus_Receipt_V1_Receipt.verifyReceipt,
                .with {
                    $0.receiptData = receiptData
                    $0.password = puzzleSharedSecret
                })
            let pending = try #require(verified.pendingRenewalInfo.first)
            #expect(pending.isInBillingRetryPeriod && pending.hasGracePeriodExpiresDate && pending.autoRenewStatus)

            // Charges work again: the next retry renews, and the device hears the renewal.
            try await Self.setBilling(admin, retry: false, grace: false)
            #expect(await recorder.wait(timeout: .seconds(60)) { !Self.renewals($0).isEmpty })
            let renewal = try #require(Self.renewals(recorder).first)
            #expect(renewal.originalTransactionID == bought.id)
            let recovered = try #require(try await Self.subscription(admin, account: "rita"))
            #expect(recovered.status == .active || recovered.renewalCount > 1)

            // Without recovery: retrying ends, and the subscription expires for a billing error.
            try await Self.setRate(admin, .oneRenewalEveryTwoSeconds)
            try await Self.setBilling(admin, retry: true, grace: false)
            let (other, otherRecorder) = try await cluster.launch(account: "ned")
            let nedBought = try await other.addPayment(Payment(productIdentifier: Self.monthly))
            #expect(await otherRecorder.purchased(nedBought.id))
            let expired = try await waitUntil(timeout: .seconds(60), interval: .milliseconds(100)) {
                try await Self.subscription(admin, account: "ned")?.status == .expired
            }
            #expect(expired)
            #expect(try await Self.subscription(admin, account: "ned")?.expirationIntent == 2)
            #expect(Self.renewals(otherRecorder).isEmpty, "a failed charge renews nothing")
            recorder.cancel()
            otherRecorder.cancel()
            await rita.close()
            await phone.close()
            await other.close()
            await admin.close()
        }
    }

    /// The ended subscription as a backend sees it: verifyReceipt's pending_renewal_info, the
    /// subscription statuses, and the signed renewal and renewal info as Apple's library reads them.
    static func checkSigned(_ cluster: StoreCluster, sam: StoreConnection, original: String, renewal: String) async throws {
        let refreshed = try await sam.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .init()).receiptData
        let verified = try await sam.call(
            Storebus_Receipt_V1_Receipt.verifyReceipt,
            .with {
                $0.receiptData = refreshed
                $0.password = puzzleSharedSecret
            })
        #expect(verified.status == 0)
        let pending = try #require(verified.pendingRenewalInfo.first { $0.originalTransactionID == original })
        #expect(!pending.autoRenewStatus && pending.expirationIntent == 1 && pending.productID == monthly && pending.autoRenewProductID == monthly)
        #expect(!pending.isInBillingRetryPeriod)

        let entitlement = try #require(try await sam.call(Storebus_Receipt_V1_Receipt.getEntitlements, .init()).entitlements.first { $0.productIdentifier == monthly })
        #expect(!entitlement.active && entitlement.reason.hasPrefix("expired on ") && entitlement.reason.hasSuffix(": auto-renew turned off"), "\(entitlement.reason)")

        let statuses = try await sam.call(Storebus_Receipt_V1_Receipt.getSubscriptionStatuses, .init())
        let group = try #require(statuses.data.first { $0.subscriptionGroupIdentifier == Self.group })
        let item = try #require(group.lastTransactions.first { $0.originalTransactionID == original })
        #expect(item.status == 2, "expired")

        let python = deployDirectory.deletingLastPathComponent().appendingPathComponent(".build/python-tools/bin/python").path
        try #require(FileManager.default.isExecutableFile(atPath: python), "make test-deps installs Apple's library into .build/python-tools")
        let work = try TemporaryDirectory(prefix: "asl")
        defer { work.remove() }
        let certificates = try await sam.call(Storebus_Receipt_V1_Receipt.getSigningCertificates, .init())
        try Data(try #require(ReceiptVerificationTests.der(pem: certificates.rootCertificatePem))).write(to: URL(fileURLWithPath: work.path("root.der")))
        let signedRenewal = try await sam.call(Storebus_Receipt_V1_Receipt.getTransaction, .with { $0.transactionID = renewal }).transaction.signedTransactionInfo
        let script = deployDirectory.deletingLastPathComponent().appendingPathComponent("scripts/apple-library-check.py").path
        let result = try await runCommand(
            python, [script, work.path("root.der"), puzzle, "--transaction", signedRenewal, "--renewal", item.signedRenewalInfo, "--transaction", item.signedTransactionInfo])
        let lines = result.output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        try #require(lines.count == 3, "the script said: \(result.output)")
        let transaction = try #require(lines[0]["payload"] as? [String: Any], "\(lines[0])")
        #expect(transaction["transactionId"] as? String == renewal)
        #expect(transaction["originalTransactionId"] as? String == original)
        #expect(transaction["transactionReason"] as? String == "RENEWAL")
        #expect(transaction["type"] as? String == "Auto-Renewable Subscription")
        #expect(transaction["subscriptionGroupIdentifier"] as? String == Self.group)
        #expect(transaction["expiresDate"] != nil && transaction["webOrderLineItemId"] != nil)
        let info = try #require(lines[1]["payload"] as? [String: Any], "\(lines[1])")
        #expect(info["originalTransactionId"] as? String == original)
        #expect(info["autoRenewProductId"] as? String == monthly && info["productId"] as? String == monthly)
        #expect((info["autoRenewStatus"] as? NSNumber)?.intValue == 0)
        #expect((info["expirationIntent"] as? NSNumber)?.intValue == 1)
        #expect(info["environment"] as? String == "Sandbox")
        #expect(lines[2]["ok"] as? Bool == true, "the status's latest transaction: \(lines[2])")
        let latest = try #require(lines[2]["payload"] as? [String: Any])
        #expect(latest["originalTransactionId"] as? String == original)
    }
}
