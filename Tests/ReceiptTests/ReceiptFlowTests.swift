import Foundation
import Receipt
import ReceiptFormat
import StoreBus
import StoreBusSDK
import StoreBusTesting
import StoreSchema
import Testing

/// The receipt service in a whole system of real processes: purchases, finishes, restores and
/// refunds reach receipts and entitlements through the payment queue's event log.
@Suite(.serialized)
struct ReceiptFlowTests {
    static let levelPack = "com.storebus.demo.puzzle.levelpack1"
    static let removeAds = "com.storebus.demo.puzzle.removeads"

    @Test("a purchase reaches the receipt and entitlements; a finished consumable leaves; restore keeps the original; a refund revokes")
    func purchasesRestoresAndRefunds() async throws {
        try await StoreCluster().running { cluster in
            let (phone, recorder) = try await cluster.launch(account: "alice")
            let alice = try StoreConnection(configuration: cluster.configuration(account: "alice"))
            // Given a consumable bought and not finished yet, and a non-consumable bought
            let coinsBought = try await phone.addPayment(Payment(productIdentifier: coins))
            let packBought = try await phone.addPayment(Payment(productIdentifier: Self.levelPack))
            #expect(await recorder.purchased(coinsBought.id))
            #expect(await recorder.purchased(packBought.id))
            // Then both are in the receipt, each its own original
            var receipt = try await Self.receipt(alice) { ids($0).isSuperset(of: [coinsBought.id, packBought.id]) }
            let liveBefore = recorder.live.count
            let pack = try #require(receipt.inApp.first { $0.transactionID == packBought.id })
            #expect(pack.originalTransactionID == packBought.id)
            #expect(pack.productID == Self.levelPack)
            #expect(pack.productType == 1)
            #expect(pack.cancellationDate == nil)
            #expect(receipt.bundleID == puzzle)
            #expect(receipt.receiptType == "ProductionSandbox")
            #expect(receipt.sha1Hash == (try AppReceipt.hash(deviceID: "phone", opaque: receipt.opaqueValue, bundleID: puzzle)))
            // And a second refresh with no purchase between holds the same purchases, and creates no
            // transaction
            let again = try await Self.receipt(alice) { _ in true }
            #expect(again.inApp == receipt.inApp)
            #expect(recorder.live.count == liveBefore)
            // And the entitlements hold the non-consumable, not the consumable
            var entitlements = try await alice.call(Storebus_Receipt_V1_Receipt.getEntitlements, .init()).entitlements
            #expect(entitlements.map(\.productIdentifier) == [Self.levelPack])
            #expect(entitlements.first?.active == true)
            #expect(entitlements.first?.originalTransactionIdentifier == packBought.id)

            // When both are finished, then the consumable leaves the receipt and the non-consumable stays
            try await phone.finish(coinsBought)
            try await phone.finish(packBought)
            receipt = try await Self.receipt(alice) { !ids($0).contains(coinsBought.id) }
            #expect(ids(receipt) == [packBought.id])

            // When another device of the account restores, then its copy has its own id and the original's
            let (tablet, tabletRecorder) = try await Self.launch(cluster, account: "alice", device: "tablet")
            let restore = try await tablet.restore()
            #expect(restore.restoredCount == 1)
            let restoredID = try #require(await Self.restoredID(tabletRecorder, product: Self.levelPack))
            let tabletConnection = try StoreConnection(configuration: cluster.configuration(account: "alice", device: "tablet"))
            receipt = try await Self.receipt(tabletConnection) { ids($0).contains(restoredID) }
            let copy = try #require(receipt.inApp.first { $0.transactionID == restoredID })
            #expect(copy.originalTransactionID == packBought.id)
            #expect(copy.originalPurchaseDate == pack.originalPurchaseDate)
            #expect(receipt.sha1Hash == (try AppReceipt.hash(deviceID: "tablet", opaque: receipt.opaqueValue, bundleID: puzzle)))

            // When the purchase is refunded (an issue in the app), then the receipt shows its
            // cancellation date on it and its copy, and the entitlement is revoked, saying why
            let admin = try cluster.admin()
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.refundTransaction,
                .with {
                    $0.transactionIdentifier = packBought.id
                    $0.revocationReason = .appIssue
                })
            receipt = try await Self.receipt(alice) { $0.inApp.allSatisfy { $0.cancellationDate != nil } }
            #expect(receipt.inApp.count == 2)
            entitlements = try await alice.call(Storebus_Receipt_V1_Receipt.getEntitlements, .init()).entitlements
            #expect(entitlements.count == 1)
            #expect(entitlements.first?.revoked == true)
            #expect(entitlements.first?.active == false)
            #expect(entitlements.first?.reason.hasPrefix("refunded on ") == true)
            let transaction = try await alice.call(Storebus_Receipt_V1_Receipt.getTransaction, .with { $0.transactionID = packBought.id }).transaction
            #expect(transaction.cancellationReason == .appIssue)
            #expect(transaction.hasCancellationDate)
            #expect(!transaction.signedTransactionInfo.isEmpty)

            // When the history is cleared, then no purchase is left in the receipt
            _ = try await admin.call(
                Storebus_PaymentQueue_V1_PaymentQueueAdmin.clearAccountTransactions,
                .with {
                    $0.appBundleID = puzzle
                    $0.accountID = "alice"
                })
            receipt = try await Self.receipt(alice) { $0.inApp.isEmpty }
            #expect(try await alice.call(Storebus_Receipt_V1_Receipt.getEntitlements, .init()).entitlements.isEmpty)
            await alice.close()
            await tabletConnection.close()
            await admin.close()
            await phone.close()
            await tablet.close()
        }
    }

    @Test("another account's receipt and entitlements are refused through the gateway")
    func otherAccountsAreRefused() async throws {
        try await StoreCluster(gatewayCount: 1).running { cluster in
            let alice = try StoreConnection(configuration: cluster.configuration(account: "alice", gateways: [0]))
            let refused = await #expect(throws: StoreError.self) {
                _ = try await alice.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .with { $0.accountID = "bob" })
            }
            #expect(refused?.status == .permissionDenied)
            let entitlements = await #expect(throws: StoreError.self) {
                _ = try await alice.call(Storebus_Receipt_V1_Receipt.getEntitlements, .with { $0.accountID = "bob" })
            }
            #expect(entitlements?.status == .permissionDenied)
            let unknownApp = await #expect(throws: StoreError.self) {
                _ = try await alice.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .with { $0.appBundleID = "com.example.unknown" })
            }
            #expect(unknownApp?.status == .permissionDenied)
            await alice.close()
        }
    }

    /// A refreshed receipt of the connection's device, decoded, once `condition` holds of it.
    static func receipt(_ connection: StoreConnection, until condition: @escaping (AppReceipt) -> Bool) async throws -> AppReceipt {
        var last: AppReceipt?
        let held = try await waitUntil(timeout: .seconds(20), interval: .milliseconds(50)) {
            let response = try await connection.call(Storebus_Receipt_V1_Receipt.refreshReceipt, .init())
            let bytes = try #require(Data(base64Encoded: response.receiptData))
            let receipt = try AppReceipt(der: ReceiptSignature.attachedPayload(of: Array(bytes)))
            last = receipt
            return condition(receipt)
        }
        let receipt = try #require(last)
        #expect(held, "the receipt never held what was expected: \(receipt.inApp.map(\.transactionID))")
        return receipt
    }

    static func launch(_ cluster: StoreCluster, account: String, device: String) async throws -> (PaymentQueue, Recorder) {
        let queue = try PaymentQueue(configuration: cluster.configuration(account: account, device: device))
        let recorder = Recorder(queue)
        guard await recorder.attached() else { throw ClusterFailure(description: "\(device)'s launch replay did not end") }
        return (queue, recorder)
    }

    /// The id of the restored transaction of `product` the recorder heard of.
    static func restoredID(_ recorder: Recorder, product: String) async -> String? {
        @Sendable func find(_ recorder: Recorder) -> String? {
            for callback in recorder.callbacks {
                if case .updatedTransactions(let transactions, _) = callback.event,
                    let restored = transactions.first(where: { $0.transactionState == .restored && $0.payment.productIdentifier == product })
                {
                    return restored.transactionIdentifier
                }
            }
            return nil
        }
        _ = await recorder.wait { find($0) != nil }
        return find(recorder)
    }
}

/// The transaction ids of a receipt.
func ids(_ receipt: AppReceipt) -> Set<String> { Set(receipt.inApp.map(\.transactionID)) }
