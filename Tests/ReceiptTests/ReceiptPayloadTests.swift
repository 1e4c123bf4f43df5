import Foundation
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import SwiftASN1
import SwiftProtobuf
import Testing

@testable import Receipt
@testable import ReceiptFormat

/// A receipt's payload put together from its purchases' kept attributes is the payload swift-asn1
/// encodes from the whole receipt: the same DER, byte for byte, set order included.
struct ReceiptPayloadTests {
    static func entry(_ index: Int, random: inout SeededRandom) -> InAppPurchaseEntry {
        let purchase = Date(timeIntervalSince1970: Double(Int64.random(in: 1_600_000_000...1_900_000_000, using: &random)))
        let subscription = Bool.random(using: &random)
        return InAppPurchaseEntry(
            quantity: Int.random(in: 1...10, using: &random), productID: "com.example.product\(Int.random(in: 0...40, using: &random))",
            transactionID: String(1_000_000_000_000_000 + index), originalTransactionID: String(1_000_000_000_000_000 + index / 3),
            purchaseDate: purchase, originalPurchaseDate: purchase.addingTimeInterval(-86_400), productType: subscription ? 2 : Int.random(in: 0...1, using: &random),
            expiresDate: subscription ? purchase.addingTimeInterval(2_592_000) : nil, webOrderLineItemID: subscription ? Int64(index) : nil,
            cancellationDate: Int.random(in: 0..<10, using: &random) == 0 ? purchase.addingTimeInterval(60) : nil,
            isTrialPeriod: Bool.random(using: &random), isInIntroOfferPeriod: Bool.random(using: &random))
    }

    @Test("for receipts of 0 to 300 purchases, the payload from kept attributes (in any order) equals swift-asn1's SET OF encoding")
    func keptAttributesMakeTheSamePayload() throws {
        var random = SeededRandom(seed: 17)
        for count in [0, 1, 2, 3, 10, 57, 300] {
            let receipt = AppReceipt(
                receiptType: "ProductionSandbox", bundleID: "com.example.app", applicationVersion: "1.\(count)", opaqueValue: Array(repeating: 7, count: 16),
                sha1Hash: Array(repeating: 9, count: 20), creationDate: Date(timeIntervalSince1970: 1_795_784_939),
                originalPurchaseDate: Date(timeIntervalSince1970: 1_700_000_000), originalApplicationVersion: "1.0",
                expirationDate: count % 2 == 0 ? nil : Date(timeIntervalSince1970: 1_800_000_000),
                inApp: (0..<count).map { Self.entry($0, random: &random) }.sorted { $0.transactionID < $1.transactionID })
            // The plain encoding: every attribute through swift-asn1's SET OF
            var attributes: [ReceiptAttribute] = [
                .init(type: 0, value: try ReceiptField.utf8(receipt.receiptType)), .init(type: 2, value: try ReceiptField.utf8(receipt.bundleID)),
                .init(type: 3, value: try ReceiptField.utf8(receipt.applicationVersion)), .init(type: 4, value: receipt.opaqueValue),
                .init(type: 5, value: receipt.sha1Hash), .init(type: 12, value: try ReceiptField.date(receipt.creationDate)),
                .init(type: 18, value: try ReceiptField.date(receipt.originalPurchaseDate)),
                .init(type: 19, value: try ReceiptField.utf8(receipt.originalApplicationVersion))
            ]
            if let expiration = receipt.expirationDate { attributes.append(.init(type: 21, value: try ReceiptField.date(expiration))) }
            for entry in receipt.inApp { attributes.append(.init(type: 17, value: try ReceiptAttribute.setDER(entry.attributes()))) }
            let plain = try ReceiptAttribute.setDER(attributes)

            var kept = try receipt.inApp.map { try $0.attributeDER() }
            kept.shuffle(using: &random)
            var shell = receipt
            shell.inApp = []
            #expect(try shell.der(inAppAttributes: kept) == plain, "\(count) purchases")
            #expect(try receipt.der() == plain, "\(count) purchases")
            // and reads back as the receipt (its purchases in the set's order)
            var decoded = try AppReceipt(der: plain)
            decoded.inApp.sort { $0.transactionID < $1.transactionID }
            #expect(decoded == receipt)
        }
    }
}

/// The receipt store's kept attributes against the plain path: every purchase read and encoded.
@Suite("Receipt store: kept attributes")
struct ReceiptEntryStoreTests {
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    @Test(
        "after purchases, restores, renewals, refunds, finishes, a moved expiry and a cleared history, the kept attributes are the purchases the receipt holds, encoded now"
    )
    func keptMatchPlain() async throws {
        let directory = try TemporaryDirectory(prefix: "entries")
        defer { directory.remove() }
        let database = try StoreDatabase(directory: directory.url, name: "receipt", migrator: ReceiptSchema.migrator)
        let store = ReceiptStore(database: database)
        let queue = Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = "com.example.app"; $0.accountID = "a"; $0.deviceID = "d"
        }
        func transaction(_ id: Int, _ type: Storebus_Catalog_V1_ProductType, _ state: Storebus_PaymentQueue_V1_TransactionState = .purchased) -> Transaction {
            .with {
                $0.transactionIdentifier = String(1_000 + id)
                $0.transactionState = state
                $0.transactionDate = Google_Protobuf_Timestamp(seconds: 1_795_000_000 + Int64(id) * 60)
                $0.payment = .with {
                    $0.productIdentifier = "p\(id % 4)"; $0.quantity = 1
                }
                $0.productType = type
                $0.queue = queue
                if type == .autoRenewableSubscription {
                    $0.expiresDate = Google_Protobuf_Timestamp(seconds: 1_795_000_000 + Int64(id) * 60 + 2_592_000)
                    $0.originalTransactionID = "1000"
                    $0.webOrderLineItemID = Int64(id)
                    $0.subscriptionGroupIdentifier = "g"
                }
            }
        }
        var events: [Storebus_PaymentQueue_V1_QueueEvent] = []
        events.append(.with { $0.updatedTransactions.transactions = [transaction(0, .autoRenewableSubscription)] })
        for id in 1...12 { events.append(.with { $0.updatedTransactions.transactions = [transaction(id, id % 3 == 0 ? .consumable : .nonConsumable)] }) }
        events.append(.with { $0.updatedTransactions.transactions = [transaction(13, .autoRenewableSubscription)] })
        // Some consumables finished (they leave the receipt), one purchase refunded
        events.append(.with { $0.removedTransactions.transactions = [transaction(3, .consumable), transaction(6, .consumable)] })
        var refunded = transaction(4, .nonConsumable)
        refunded.cancellationDate = Google_Protobuf_Timestamp(seconds: 1_795_100_000)
        events.append(.with { $0.refundedTransactions.transactions = [refunded] })
        // The running period's end moved (renew now, extend)
        events.append(
            .with {
                $0.subscriptionChanged.subscription = .with {
                    $0.queue = queue
                    $0.subscriptionGroupIdentifier = "g"
                    $0.originalTransactionIdentifier = "1000"
                    $0.latestTransactionIdentifier = "1013"
                    $0.expiresDate = Google_Protobuf_Timestamp(seconds: 1_799_999_999)
                    $0.status = .active
                }
            })
        func compare(_ when: String) async throws {
            let kept = try await store.receiptEntries(app: queue.appBundleID, account: queue.accountID)
            let plain = try await store.purchases(app: queue.appBundleID, account: queue.accountID).filter(\.inReceipt).map { try ReceiptBook.entry($0).attributeDER() }
            #expect(kept.sorted { $0.lexicographicallyPrecedes($1) } == plain.sorted { $0.lexicographicallyPrecedes($1) }, "\(when)")
            #expect(!plain.isEmpty || when == "cleared", "\(when)")
        }
        for (seq, event) in events.enumerated() {
            try await database.write { db in try ReceiptStore.apply(db, event, seq: UInt64(seq + 1)) }
            try await compare("after event \(seq + 1)")
        }
        // Rows from before attributes were kept are encoded when a receipt needs them
        try await database.write { db in try db.execute(sql: "UPDATE rc_transaction SET entry = NULL WHERE CAST(id AS INTEGER) % 2 = 0") }
        try await compare("some not kept")
        try await database.write { db in
            try ReceiptStore.apply(
                db,
                .with {
                    $0.historyCleared = .with {
                        $0.appBundleID = queue.appBundleID; $0.accountID = queue.accountID
                    }
                }, seq: 100)
        }
        try await compare("cleared")
        try database.close()
    }
}

/// verifyReceipt's JSON written directly against its plain twin, Foundation's JSONSerialization.
struct AppleJSONTests {
    @Test("objects of every kind of member, keys and strings of every sort: the bytes written directly parse to JSONSerialization's object, keys in byte order")
    func directMatchesFoundation() throws {
        var random = SeededRandom(seed: 21)
        let samples = ["", "plain", "quote \" backslash \\ slash /", "line\nbreak\ttab\u{1}", "é ü 日本 🎉", "\u{7f}\u{2028}"]
        func object(depth: Int) -> JSONObjectWriter {
            var json = JSONObjectWriter()
            for index in 0..<Int.random(in: 1...12, using: &random) {
                let key = ["status", "in_app", "is-retryable", "b_\(index)", "a", "é\(index)", "receipt_creation_date_ms"].randomElement(using: &random)!
                switch Int.random(in: 0..<(depth > 2 ? 3 : 5), using: &random) {
                case 0: json.set(key, samples.randomElement(using: &random)!)
                case 1: json.set(key, Int.random(in: -1_000_000...1_000_000, using: &random))
                case 2: json.set(key, Bool.random(using: &random))
                case 3: json.set(key, object(depth: depth + 1))
                default: json.set(key, (0..<Int.random(in: 0...3, using: &random)).map { _ in object(depth: depth + 1) })
                }
            }
            return json
        }
        for _ in 0..<300 {
            let json = object(depth: 0)
            let direct = try JSONSerialization.jsonObject(with: Data(json.json)) as? NSDictionary
            let plain = try JSONSerialization.jsonObject(with: try JSONSerialization.data(withJSONObject: json.foundationObject)) as? NSDictionary
            #expect(direct != nil && direct == plain, "\(String(decoding: json.json, as: UTF8.self))")
        }
        var ordered = JSONObjectWriter()
        ordered.set("status", 0)
        ordered.set("environment", "Sandbox")
        ordered.set("is-retryable", false)
        ordered.set("status", 21002)
        #expect(String(decoding: ordered.json, as: UTF8.self) == #"{"environment":"Sandbox","is-retryable":false,"status":21002}"#)
    }
}
