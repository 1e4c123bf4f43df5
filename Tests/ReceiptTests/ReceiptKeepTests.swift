import Foundation
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import SwiftProtobuf
import Testing

@testable import Receipt

/// A purchase's row written once with its receipt entry (the fast path of `ReceiptStore.keep`)
/// against its plain twin: written, read back, encoded and written again.
struct ReceiptKeepTests {
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    /// 600 events at random: purchases and restores of every product type with any field set or
    /// not, renewals of earlier subscriptions, the same transactions again (refunded, upgraded,
    /// finished), finishes and a cleared history.
    static func events(seed: UInt64) -> [Storebus_PaymentQueue_V1_QueueEvent] {
        var random = SeededRandom(seed: seed)
        var made: [Transaction] = []
        var events: [Storebus_PaymentQueue_V1_QueueEvent] = []
        let types: [Storebus_Catalog_V1_ProductType] = [.consumable, .nonConsumable, .autoRenewableSubscription, .nonRenewingSubscription, .unspecified]
        func text(_ longest: Int) -> String {
            String((0..<Int.random(in: 0...longest, using: &random)).map { _ in "aZ9 é~\"\\日🎉".randomElement(using: &random)! })
        }
        func timestamp() -> Google_Protobuf_Timestamp {
            Google_Protobuf_Timestamp(seconds: Int64.random(in: 1_500_000_000...1_900_000_000, using: &random), nanos: Int32.random(in: 0...999, using: &random) * 1_000_000)
        }
        for index in 0..<600 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0 where !made.isEmpty:
                // A transaction seen before, changed: refunded, upgraded or finished.
                var again = made.randomElement(using: &random)!
                if Bool.random(using: &random) {
                    again.cancellationDate = timestamp()
                    again.cancellationReason = Bool.random(using: &random) ? .appIssue : .other
                }
                again.isUpgraded = Bool.random(using: &random)
                again.finished = Bool.random(using: &random)
                events.append(Bool.random(using: &random) ? .with { $0.refundedTransactions.transactions = [again] } : .with { $0.updatedTransactions.transactions = [again] })
            case 1 where !made.isEmpty:
                events.append(.with { $0.removedTransactions.transactions = [made.randomElement(using: &random)!] })
            case 2:
                events.append(
                    .with {
                        $0.historyCleared = .with {
                            $0.appBundleID = "com.example.app"; $0.accountID = "a\(Int.random(in: 0...2, using: &random))"
                        }
                    })
            default:
                var transaction = Transaction.with {
                    $0.transactionIdentifier = String(1_000_000 + index)
                    $0.transactionState = [.purchased, .restored, .purchasing, .failed].randomElement(using: &random)!
                    $0.transactionDate = timestamp()
                    $0.payment = .with {
                        $0.productIdentifier = "p\(Int.random(in: 0...5, using: &random))"
                        $0.quantity = Int32.random(in: -1...5, using: &random)
                        $0.applicationUsername = text(12)
                    }
                    $0.productType = types.randomElement(using: &random)!
                    $0.queue = .with {
                        $0.appBundleID = "com.example.app"; $0.accountID = "a\(Int.random(in: 0...2, using: &random))"; $0.deviceID = text(4)
                    }
                    $0.storefront = "USA"
                    $0.price = "0.99"
                    $0.currencyCode = "USD"
                    $0.isTrialPeriod = Bool.random(using: &random)
                    $0.isInIntroOfferPeriod = Bool.random(using: &random)
                    $0.finished = Bool.random(using: &random)
                }
                if Bool.random(using: &random) { transaction.expiresDate = timestamp() }
                if Int.random(in: 0..<5, using: &random) == 0 { transaction.webOrderLineItemID = Int64.random(in: 0...99, using: &random) }
                if transaction.productType == .autoRenewableSubscription {
                    transaction.subscriptionGroupIdentifier = "g\(Int.random(in: 0...1, using: &random))"
                    // A renewal of a subscription bought before (or of one never seen).
                    transaction.originalTransactionID = made.filter { $0.productType == .autoRenewableSubscription }.randomElement(using: &random)?.transactionIdentifier ?? "999"
                    if Bool.random(using: &random) { transaction.transactionReason = .renewal }
                }
                if transaction.transactionState == .restored, let original = made.randomElement(using: &random) {
                    transaction.originalTransaction = original
                }
                made.append(transaction)
                events.append(.with { $0.updatedTransactions.transactions = [transaction] })
            }
        }
        return events
    }

    @Test("600 random events applied with the row written once and with the plain path leave the same rows, every column and receipt entry byte for byte")
    func keepMatchesPlain() async throws {
        let directory = try TemporaryDirectory(prefix: "keep")
        defer { directory.remove() }
        var tables: [[SQLRow]] = []
        for fast in [false, true] {
            let database = try StoreDatabase(directory: directory.url, name: fast ? "fast" : "plain", durability: .normal, migrator: ReceiptSchema.migrator)
            for (index, event) in Self.events(seed: 2_026).enumerated() {
                try await database.write { db in try ReceiptStore.apply(db, event, seq: UInt64(index + 1), fast: fast) }
            }
            tables.append(
                try await database.read { db in
                    try db.rows(cached: "SELECT * FROM rc_transaction ORDER BY id") + db.rows(cached: "SELECT * FROM rc_account ORDER BY app, account")
                })
            try database.close()
        }
        let purchases = tables[0].filter { $0.names.contains("entry") }
        #expect(purchases.count > 150, "\(purchases.count) purchases")
        #expect(purchases.allSatisfy { $0.values[$0.names.firstIndex(of: "entry")!] != .null }, "every purchase has its entry")
        #expect(tables[1].map(\.names) == tables[0].map(\.names))
        #expect(tables[1].map(\.values) == tables[0].map(\.values))
    }
}
