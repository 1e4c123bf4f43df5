import Foundation
import StoreBusTesting
import StoreSchema
import SwiftProtobuf
import Testing

@testable import Receipt

/// VerifyReceipt's answer written directly against swift-protobuf's encoder.
struct VerifyReceiptJSONTests {
    static func text(_ random: inout SeededRandom) -> String {
        let pieces = ["a", "Z", "9", "_", ".", " ", "\"", "\\", "\n", "\u{0}", "\u{1f}", "\u{7f}", "é", "日", "🎉", "com.example.gems", "1000000000000042"]
        guard Int.random(in: 0..<4, using: &random) > 0 else { return "" }
        return (0..<Int.random(in: 1..<10, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined()
    }

    static func timestamp(_ random: inout SeededRandom) -> Google_Protobuf_Timestamp {
        let seconds = Int64.random(in: -62_135_596_800...253_402_300_799, using: &random)
        let nanos: Int32 = [0, Int32.random(in: 0..<1000, using: &random) * 1_000_000, Int32.random(in: 0..<1_000_000_000, using: &random)][Int.random(in: 0..<3, using: &random)]
        return Google_Protobuf_Timestamp(seconds: seconds, nanos: nanos)
    }

    static func purchase(_ random: inout SeededRandom) -> Storebus_Receipt_V1_InAppPurchase {
        var purchase = Storebus_Receipt_V1_InAppPurchase()
        func maybe() -> Bool { Bool.random(using: &random) }
        purchase.quantity = maybe() ? Int32.random(in: -3...1_000, using: &random) : 0
        purchase.productID = text(&random)
        purchase.transactionID = text(&random)
        purchase.originalTransactionID = text(&random)
        if maybe() { purchase.purchaseDate = timestamp(&random) }
        if maybe() { purchase.originalPurchaseDate = timestamp(&random) }
        if maybe() { purchase.expiresDate = timestamp(&random) }
        if maybe() { purchase.cancellationDate = timestamp(&random) }
        purchase.isTrialPeriod = maybe()
        purchase.webOrderLineItemID = text(&random)
        purchase.productType = Storebus_Catalog_V1_ProductType.allCases.randomElement(using: &random)!
        purchase.cancellationReason = Storebus_PaymentQueue_V1_RevocationReason.allCases.randomElement(using: &random)!
        purchase.isInIntroOfferPeriod = maybe()
        purchase.signedTransactionInfo = maybe() ? text(&random) + "." + String(repeating: "eyJh", count: Int.random(in: 0...300, using: &random)) : ""
        purchase.deviceID = text(&random)
        // Now and then a value without a name: the whole answer goes to swift-protobuf.
        if Int.random(in: 0..<50, using: &random) == 0 { purchase.productType = .UNRECOGNIZED(77) }
        return purchase
    }

    @Test(
        "1,000 random answers (receipts of up to 40 purchases, latest receipt info, renewal info, every status, escapes, times of any precision) are swift-protobuf's bytes exactly; the fields written are proto-schemas/'"
    )
    func directMatchesSwiftProtobuf() throws {
        var random = SeededRandom(seed: 2211)
        var direct = 0
        for _ in 0..<1_000 {
            var response = Storebus_Receipt_V1_VerifyReceiptResponse()
            func maybe() -> Bool { Bool.random(using: &random) }
            response.status = [0, 21_002, 21_003, 21_100, Int32.random(in: Int32.min...Int32.max, using: &random)][Int.random(in: 0..<5, using: &random)]
            response.environment = [Self.text(&random), "Sandbox", ""][Int.random(in: 0..<3, using: &random)]
            if maybe() {
                response.receipt = .with {
                    $0.bundleID = Self.text(&random)
                    $0.applicationVersion = Self.text(&random)
                    if maybe() { $0.receiptCreationDate = Self.timestamp(&random) }
                    $0.originalApplicationVersion = Self.text(&random)
                    $0.inApp = (0..<Int.random(in: 0...40, using: &random)).map { _ in Self.purchase(&random) }
                    if maybe() { $0.expirationDate = Self.timestamp(&random) }
                    $0.receiptType = Self.text(&random)
                }
            }
            response.latestReceiptInfo = (0..<Int.random(in: 0...3, using: &random)).map { _ in Self.purchase(&random) }
            response.latestReceipt = maybe() ? Data((0..<Int.random(in: 0...2_000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }).base64EncodedString() : ""
            response.isRetryable = maybe()
            response.pendingRenewalInfo = (0..<Int.random(in: 0...2, using: &random)).map { _ in
                .with {
                    $0.autoRenewProductID = Self.text(&random)
                    $0.productID = Self.text(&random)
                    $0.originalTransactionID = Self.text(&random)
                    $0.autoRenewStatus = maybe()
                    $0.expirationIntent = Int32.random(in: -1...5, using: &random)
                    $0.isInBillingRetryPeriod = maybe()
                    if maybe() { $0.gracePeriodExpiresDate = Self.timestamp(&random) }
                }
            }
            let plain: [UInt8] = try response.jsonUTF8Bytes()
            #expect(try VerifyReceiptJSON.encode(response) == plain, "\(String(decoding: plain, as: UTF8.self).prefix(120))")
            var out: [UInt8] = []
            if VerifyReceiptJSON.appendDirectly(response, to: &out) { direct += 1 }
        }
        // Most were written here, not handed to swift-protobuf (a value without a name now and then).
        #expect(direct > 500, "\(direct) of 1,000 written directly")

        for (message, written) in VerifyReceiptJSON.fieldsWritten {
            let numbers = try protoFieldNumbers(of: message, in: "storebus/receipt/v1/receipt.proto")
            #expect(numbers == written, "\(message): proto-schemas/ has fields \(numbers); VerifyReceiptJSON writes \(written)")
        }
    }
}
