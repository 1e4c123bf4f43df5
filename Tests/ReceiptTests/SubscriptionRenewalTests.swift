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
            try await Task.sleep(for: .seconds(1))
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
                #expect(renewal.subscriptionOriginalIdentifier == bought.id)
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
            #expect(Set(periods.compactMap(\.webOrderLineItemID)).count == periods.count, "each period its own billing line")
            for (earlier, later) in zip(periods, periods.dropFirst()) {
                #expect(earlier.expiresDate == later.purchaseDate)
            }
            recorder.cancel()
            await sam.close()
            await phone.close()
            await admin.close()
        }
    }
}
