import StoreBus
import StoreBusServer
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

extension MessageCodec where Request == Storebus_Receipt_V1_VerifyReceiptRequest, Response == Storebus_Receipt_V1_VerifyReceiptResponse {
    /// VerifyReceipt's codec: the request read directly when it has the plain shape
    /// (``VerifyReceiptJSON/request(_:)``), by swift-protobuf otherwise; the answer, the decoded receipt with
    /// each of its purchases (a 100-purchase receipt's is 60 KB), written directly: swift-protobuf's
    /// encoder was a tenth of the receipt service's CPU per verification. With the fast paths off,
    /// swift-protobuf's (`VerifyReceiptJSONTests` holds the two to the same bytes).
    static let verifyReceipt = MessageCodec(
        decode: { body in try VerifyReceiptJSON.request(body) ?? JSONCodec.decode(Request.self, from: body) },
        encode: { response in
            guard FastPaths.enabled else { return try JSONCodec.encode(response) }
            return try VerifyReceiptJSON.encode(response)
        }
    )
}

/// VerifyReceiptResponse's proto3 JSON, byte for byte as swift-protobuf writes it (see
/// ``ProtoJSONObject``); an answer it does not write exactly (unknown fields, an enum value without
/// a name, a time outside years 1 to 9999) goes to swift-protobuf whole.
enum VerifyReceiptJSON {
    typealias Response = Storebus_Receipt_V1_VerifyReceiptResponse
    typealias Purchase = Storebus_Receipt_V1_InAppPurchase

    /// The field numbers written here, per message (the tests hold them against proto-schemas/).
    static let fieldsWritten: [String: [Int]] = [
        "VerifyReceiptResponse": Array(1...7),
        "AppReceipt": Array(1...7),
        "InAppPurchase": Array(1...15),
        "PendingRenewalInfo": Array(1...7)
    ]

    /// The request of `body` when it has the plain shape clients send (an ASCII object of the
    /// message's members by their JSON names, each once, strings without escapes, the flag `true`
    /// or `false`), read without swift-protobuf, whose decoder reads a string a character at a
    /// time: the 36 KB of a 100-purchase receipt's base64 were a sixth of a verification's CPU
    /// outside the signature check. Nil for anything else (and with fast paths off): the caller
    /// decodes it with swift-protobuf. `VerifyReceiptJSONTests` holds the two to the same messages.
    static func request(_ body: [UInt8]) -> Storebus_Receipt_V1_VerifyReceiptRequest? {
        guard FastPaths.enabled, let members = JSONScanner.plainMembers(body) else { return nil }
        var request = Storebus_Receipt_V1_VerifyReceiptRequest()
        for member in members {
            switch member.name {
            case "receiptData":
                guard let text = JSONScanner.plainText(body, member.value) else { return nil }
                request.receiptData = text
            case "password":
                guard let text = JSONScanner.plainText(body, member.value) else { return nil }
                request.password = text
            case "excludeOldTransactions":
                guard let flag = JSONScanner.bool(body, member.value) else { return nil }
                request.excludeOldTransactions = flag
            default:
                return nil
            }
        }
        return request
    }

    static func encode(_ response: Response) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256 + 600 * (response.receipt.inApp.count + response.latestReceiptInfo.count) + response.latestReceipt.utf8.count)
        guard appendDirectly(response, to: &out) else { return try JSONCodec.encode(response) }
        return out
    }

    /// Appends the answer's JSON; false (`out` partly written) for one written by swift-protobuf.
    static func appendDirectly(_ response: Response, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(response.unknownFields, to: &out) { fields in
            fields.int32("status", response.status)
            fields.string("environment", response.environment)
            if response.hasReceipt, !fields.message("receipt", { append(response.receipt, to: &$0) }) { return false }
            guard fields.messages("latestReceiptInfo", response.latestReceiptInfo, append) else { return false }
            fields.string("latestReceipt", response.latestReceipt)
            fields.bool("isRetryable", response.isRetryable)
            return fields.messages("pendingRenewalInfo", response.pendingRenewalInfo, append)
        }
    }

    private static func append(_ receipt: Storebus_Receipt_V1_AppReceipt, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(receipt.unknownFields, to: &out) { fields in
            fields.string("bundleId", receipt.bundleID)
            fields.string("applicationVersion", receipt.applicationVersion)
            guard fields.timestamp("receiptCreationDate", receipt.hasReceiptCreationDate ? receipt.receiptCreationDate : nil) else { return false }
            fields.string("originalApplicationVersion", receipt.originalApplicationVersion)
            guard fields.messages("inApp", receipt.inApp, append),
                fields.timestamp("expirationDate", receipt.hasExpirationDate ? receipt.expirationDate : nil)
            else { return false }
            fields.string("receiptType", receipt.receiptType)
            return true
        }
    }

    private static func append(_ purchase: Purchase, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(purchase.unknownFields, to: &out) { fields in
            fields.int32("quantity", purchase.quantity)
            fields.string("productId", purchase.productID)
            fields.string("transactionId", purchase.transactionID)
            fields.string("originalTransactionId", purchase.originalTransactionID)
            guard fields.timestamp("purchaseDate", purchase.hasPurchaseDate ? purchase.purchaseDate : nil),
                fields.timestamp("originalPurchaseDate", purchase.hasOriginalPurchaseDate ? purchase.originalPurchaseDate : nil),
                fields.timestamp("expiresDate", purchase.hasExpiresDate ? purchase.expiresDate : nil),
                fields.timestamp("cancellationDate", purchase.hasCancellationDate ? purchase.cancellationDate : nil)
            else { return false }
            fields.bool("isTrialPeriod", purchase.isTrialPeriod)
            fields.string("webOrderLineItemId", purchase.webOrderLineItemID)
            guard fields.enumeration("productType", purchase.productType.rawValue, names: ProtoEnumNames.productType),
                fields.enumeration("cancellationReason", purchase.cancellationReason.rawValue, names: ProtoEnumNames.revocationReason)
            else { return false }
            fields.bool("isInIntroOfferPeriod", purchase.isInIntroOfferPeriod)
            fields.string("signedTransactionInfo", purchase.signedTransactionInfo)
            fields.string("deviceId", purchase.deviceID)
            return true
        }
    }

    private static func append(_ renewal: Storebus_Receipt_V1_PendingRenewalInfo, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(renewal.unknownFields, to: &out) { fields in
            fields.string("autoRenewProductId", renewal.autoRenewProductID)
            fields.string("productId", renewal.productID)
            fields.string("originalTransactionId", renewal.originalTransactionID)
            fields.bool("autoRenewStatus", renewal.autoRenewStatus)
            fields.int32("expirationIntent", renewal.expirationIntent)
            fields.bool("isInBillingRetryPeriod", renewal.isInBillingRetryPeriod)
            return fields.timestamp("gracePeriodExpiresDate", renewal.hasGracePeriodExpiresDate ? renewal.gracePeriodExpiresDate : nil)
        }
    }
}
