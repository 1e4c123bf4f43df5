import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import Testing

/// What StoreKit does and StoreBus did not: a non-consumable bought again is one product, not two
/// originals; every device of the account hears a refund; restore brings back auto-renewable
/// subscriptions once each and leaves non-renewing ones to the app. Against the real processes.
@Suite("Restore and refund as StoreKit does them, against the real processes")
struct RestoreFidelityTests {
    let removeAds = "com.storebus.demo.puzzle.removeads"
    let monthly = "com.storebus.demo.puzzle.premium.monthly"
    let seasonPass = "com.storebus.demo.puzzle.seasonpass"
    var shared: RestoreAndRefundTests { RestoreAndRefundTests() }

    @Test("a non-consumable bought twice is one product: the second purchase is not charged and names the first as original, and a restore on another device gives one restored transaction")
    func boughtTwice() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let phone = queueRef(device: "phone")
        let first = try await shared.buy(client, phone, removeAds)
        let second = try await shared.buy(client, phone, removeAds)
        let transactions = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = "alice"
                $0.includeFinished = true
            }
        ).transactions
        let again = try #require(transactions.first { $0.transactionIdentifier == second })
        #expect(again.transactionState == .purchased && again.originalTransactionID == first)
        #expect(!again.hasOriginalTransaction, "bought again is a purchase, not a restore")
        let charges = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listCharges,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = "alice"
            }
        ).charges
        #expect(charges.map(\.transactionIdentifier) == [first])
        let tablet = queueRef(device: "tablet")
        #expect(try await shared.restore(client, tablet).restoredCount == 1)
        let restored = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = tablet }).transactions
        #expect(restored.map(\.originalTransaction.transactionIdentifier) == [first])
        await client.shutdown()
        await fixture.stop()
    }

    @Test("restore brings back an auto-renewable subscription once, renewed or not, and not a non-renewing one")
    func subscriptions() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        _ = try await client.call(
            Storebus_PaymentQueue_V1_Subscriptions.setRenewalRate,
            .with {
                $0.appBundleID = puzzle
                $0.rate = .oneRenewalEveryTwoSeconds
            })
        let phone = queueRef(device: "phone")
        let subscribed = try await shared.buy(client, phone, monthly)
        let pass = try await shared.buy(client, phone, seasonPass)
        let passTransaction = try await client.call(
            Storebus_PaymentQueue_V1_PaymentQueueAdmin.listAccountTransactions,
            .with {
                $0.appBundleID = puzzle
                $0.accountID = "alice"
                $0.includeFinished = true
            }
        ).transactions.first { $0.transactionIdentifier == pass }
        #expect(passTransaction?.hasExpiresDate == true, "a non-renewing subscription lasts its duration")
        // Two renewals later
        let renewed = await waitUntil(timeout: .seconds(60)) {
            let subscriptions = try? await client.call(
                Storebus_PaymentQueue_V1_Subscriptions.listSubscriptions,
                .with {
                    $0.appBundleID = puzzle
                    $0.accountID = "alice"
                }
            ).subscriptions
            return (subscriptions?.first?.renewalCount ?? 0) >= 2
        }
        #expect(renewed)
        let tablet = queueRef(device: "tablet")
        #expect(try await shared.restore(client, tablet).restoredCount == 1)
        let restored = try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.listTransactions, .with { $0.queue = tablet }).transactions
        #expect(restored.map(\.originalTransaction.transactionIdentifier) == [subscribed])
        await client.shutdown()
        await fixture.stop()
    }

    @Test("a refund is heard by every device of the account, one whose queue is empty included")
    func refundReachesEmptyQueues() async throws {
        let (fixture, client) = try await PaymentQueueFixture.started()
        let phone = queueRef(device: "phone"), watch = queueRef(device: "watch")
        // The watch has launched (its launch replay asked for its queue) and holds nothing.
        #expect(try await client.call(Storebus_PaymentQueue_V1_PaymentQueue.snapshotQueue, .with { $0.queue = watch }).transactions.isEmpty)
        let bought = try await shared.buy(client, phone, removeAds)
        _ = try await client.call(Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction, .with { $0.transactionIdentifier = bought })
        let heard = try await fixture.events(watch, client: client).filter { $0.revokedEntitlements.productIdentifiers == [removeAds] }
        #expect(heard.count == 1, "the watch hears the revocation")
        await client.shutdown()
        await fixture.stop()
    }
}
