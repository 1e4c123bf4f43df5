import Foundation
import StoreBus
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

    @Test(
        "requests read directly: as swift-protobuf reads them when they have the plain shape, left to it otherwise (escapes, proto names, nulls, duplicates, unknown members, other UTF-8, broken JSON)"
    )
    func requestsReadDirectly() throws {
        var random = SeededRandom(seed: 0x7E51)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var read = 0
        for round in 0..<2_000 {
            var request = Storebus_Receipt_V1_VerifyReceiptRequest()
            request.receiptData = String(decoding: (0..<Int.random(in: 0...3_000, using: &random)).map { _ in alphabet.randomElement(using: &random)! }, as: UTF8.self)
            if Bool.random(using: &random) { request.password = Int.random(in: 0..<4, using: &random) == 0 ? Self.text(&random) : "0123456789abcdef" }
            request.excludeOldTransactions = Bool.random(using: &random)
            var body = try JSONCodec.encode(request)
            // Some of them changed the way other writers write, or broken
            switch round % 10 {
            case 0: body = Array(String(decoding: body, as: UTF8.self).replacingOccurrences(of: "receiptData", with: "receipt_data").utf8)
            case 1: body = Array(String(decoding: body, as: UTF8.self).replacingOccurrences(of: "/", with: "\\/").utf8)
            case 2: body = Array(#"{"password":null,"#.utf8) + body.dropFirst()
            case 3: body = Array(#"{"receiptData":"QQ==","#.utf8) + body.dropFirst()
            case 4: body = Array(#"{"unknown":1,"#.utf8) + body.dropFirst()
            case 5: body = Array(#"{ "excludeOldTransactions" : true , "#.utf8) + body.dropFirst()
            case 6: if body.count > 2 { body.removeLast(Int.random(in: 1...2, using: &random)) }
            case 7: body = Array(#"{"excludeOldTransactions":"true","#.utf8) + body.dropFirst()
            default: break
            }
            if body.count > 2, body[body.count - 2] == UInt8(ascii: ",") { body.remove(at: body.count - 2) }
            let plain = try? JSONCodec.decode(Storebus_Receipt_V1_VerifyReceiptRequest.self, from: body)
            if let direct = VerifyReceiptJSON.request(body) {
                read += 1
                #expect(direct == plain, "\(String(decoding: body.prefix(120), as: UTF8.self))")
            }
        }
        // The unchanged and the spaced ones are mostly of the plain shape (three in ten)
        #expect(read > 400)
    }
}

/// `POST /verifyReceipt` bodies read directly against JSONDecoder.
struct VerifyReceiptHTTPTests {
    @Test("bodies read directly are what JSONDecoder reads (members of every type, missing, extra, escaped, given twice, white space); any other shape is left to it")
    func directMatchesDecoder() throws {
        var random = SeededRandom(seed: 0x4775)
        let values: [String] = [
            #""TUlJQQ==""#, #""a\/b""#, "12", "null", "true", "false", #""true""#, "{}", "[1]", #""secret""#, #""sé""#, "1.5",
            #""TU\/J\nQ\r\tQQ==""#, #""q\"b\\s\b\f""#, #""\u00e9\u0041\u20AC""#, #""\uD83C\uDF89 \ud83c\udf89""#, #""\uD83C""#, #""\uDF89x""#,
            #""\uD83Cx\uDF89""#, #""\u0000""#
        ]
        var read = 0
        for _ in 0..<4_000 {
            var members: [String] = []
            for name in ["receipt-data", "password", "exclude-old-transactions", "other", "receipt-data"] where Int.random(in: 0..<3, using: &random) > 0 {
                members.append("\"\(name)\"\(Bool.random(using: &random) ? ":" : " : ")\(values.randomElement(using: &random)!)")
            }
            let body = Array("{\(members.joined(separator: ","))}".utf8)
            let decoded = try? JSONDecoder().decode(VerifyReceiptHTTP.VerifyRequest.self, from: Data(body))
            if let direct = VerifyReceiptHTTP.VerifyRequest.direct(body, fast: true) {
                read += 1
                #expect(direct == decoded, "\(String(decoding: body, as: UTF8.self))")
            }
            #expect(VerifyReceiptHTTP.VerifyRequest.direct(body, fast: false) == nil)
        }
        #expect(read > 200)
        // Base64 with its slashes escaped (NSJSONSerialization, PHP) is read directly.
        let escaped = try JSONSerialization.data(withJSONObject: ["receipt-data": "TU/JQ+/=", "password": "p/w"])
        #expect(String(decoding: escaped, as: UTF8.self).contains(#"\/"#))
        #expect(VerifyReceiptHTTP.VerifyRequest.direct(Array(escaped), fast: true) == .init(receiptData: "TU/JQ+/=", password: "p/w", excludeOldTransactions: nil))
    }
}
