import Foundation
import StoreBus
import StoreBusStorage
import StoreSchema
import SwiftProtobuf

/// PaymentTransaction, and the queue events that carry transactions, in proto3 JSON written
/// directly: byte for byte what swift-protobuf writes, at a fraction of the cost.
///
/// Every purchase writes a transaction's JSON four times (the PURCHASING event, the AddPayment
/// answer, the decision's event, the finish's event); through swift-protobuf's encoder that was about
/// a tenth of the payment queue's CPU in the flow benchmark. A transaction this writer does not handle exactly (unknown
/// fields kept from a newer peer, an enum value without a name, a download in progress whose
/// doubles swift-protobuf formats its own way, a time outside years 1 to 9999) goes through
/// swift-protobuf instead. The tests compare both writers on thousands of random transactions and
/// check that the fields written here are those of proto-schemas/, so a new field cannot be left out
/// unnoticed.
enum TransactionJSON {
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    /// The field numbers written here, per message (the tests hold them against proto-schemas/).
    static let fieldsWritten: [String: [Int]] = [
        "PaymentTransaction": Array(1...23),
        "Payment": Array(1...5),
        "StoreKitError": [1, 2],
        "Download": Array(1...9),
        "QueueRef": [1, 2, 3],
        "AddPaymentRequest": [1, 2, 3, 4]
    ]

    /// `transaction`'s proto3 JSON.
    static func encode(_ transaction: Transaction) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        try append(transaction, to: &out)
        return out
    }

    /// Appends `transaction`'s proto3 JSON to `out`.
    static func append(_ transaction: Transaction, to out: inout [UInt8]) throws {
        let mark = out.count
        if !appendDirectly(transaction, to: &out) {
            out.removeSubrange(mark...)
            let bytes: [UInt8] = try transaction.jsonUTF8Bytes()
            out += bytes
        }
    }

    /// The AddPaymentResponse holding `transaction`, as proto3 JSON.
    static func addPaymentResponse(_ transaction: Transaction) throws -> [UInt8] {
        var out = Array(#"{"transaction":"#.utf8)
        out.reserveCapacity(512)
        try append(transaction, to: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `request`'s proto3 JSON as a string, as swift-protobuf's `jsonString()` writes it: the digest
    /// kept with an idempotency key, which a retry's must equal, so its bytes cannot change (through
    /// swift-protobuf it took 26K instructions of every keyed AddPayment, 3% of a purchase's in this
    /// process). A request with unknown fields goes through swift-protobuf.
    static func string(_ request: Storebus_PaymentQueue_V1_AddPaymentRequest) throws -> String {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        let written = ProtoJSONObject.write(request.unknownFields, to: &out) { fields in
            if request.hasQueue, !fields.message("queue", { appendQueue(request.queue, to: &$0) }) { return false }
            if request.hasPayment, !fields.message("payment", { appendPayment(request.payment, to: &$0) }) { return false }
            fields.string("storefront", request.storefront)
            fields.string("idempotencyKey", request.idempotencyKey)
            return true
        }
        guard written else { return try request.jsonString() }
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends a QueueEvent announcing `transactions` as updated (`removed`: as removed) to `queue`,
    /// as proto3 JSON: the payload of the events the queue's observers hear.
    static func appendQueueEvent(
        _ transactions: [Transaction], removed: Bool, queue: Storebus_PaymentQueue_V1_QueueRef, to out: inout [UInt8]
    ) throws {
        let mark = out.count
        out.reserveCapacity(out.count + 512 * transactions.count + 128)
        out += removed ? #"{"removedTransactions":{"#.utf8 : #"{"updatedTransactions":{"#.utf8
        // A repeated field without elements is left out, as swift-protobuf leaves it out.
        if !transactions.isEmpty {
            out += #""transactions":["#.utf8
            for (index, transaction) in transactions.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                try append(transaction, to: &out)
            }
            out.append(UInt8(ascii: "]"))
        }
        out += #"},"queue":"#.utf8
        guard appendQueue(queue, to: &out) else {
            // A queue with unknown fields (never one decoded from JSON): the whole event through swift-protobuf.
            out.removeSubrange(mark...)
            var event = Storebus_PaymentQueue_V1_QueueEvent()
            event.queue = queue
            if removed { event.removedTransactions.transactions = transactions } else { event.updatedTransactions.transactions = transactions }
            out += try event.jsonUTF8Bytes() as [UInt8]
            return
        }
        out.append(UInt8(ascii: "}"))
    }

    // MARK: Writing

    /// Appends the transaction's JSON (see ``ProtoJSONObject/write(_:to:_:)``).
    private static func appendDirectly(_ transaction: Transaction, to out: inout [UInt8]) -> Bool {
        guard FastPaths.enabled else { return false }
        return ProtoJSONObject.write(transaction.unknownFields, to: &out) { fields in
            fields.string("transactionIdentifier", transaction.transactionIdentifier)
            guard fields.enumeration("transactionState", transaction.transactionState.rawValue, names: ProtoEnumNames.transactionState),
                fields.timestamp("transactionDate", transaction.hasTransactionDate ? transaction.transactionDate : nil)
            else { return false }
            if transaction.hasPayment, !fields.message("payment", { appendPayment(transaction.payment, to: &$0) }) { return false }
            if transaction.hasOriginalTransaction, !fields.message("originalTransaction", { appendDirectly(transaction.originalTransaction, to: &$0) }) { return false }
            if transaction.hasError, !fields.message("error", { appendError(transaction.error, to: &$0) }) { return false }
            guard fields.messages("downloads", transaction.downloads, appendDownload) else { return false }
            fields.string("storefront", transaction.storefront)
            if transaction.hasQueue, !fields.message("queue", { appendQueue(transaction.queue, to: &$0) }) { return false }
            fields.bool("finished", transaction.finished)
            guard fields.enumeration("productType", transaction.productType.rawValue, names: ProtoEnumNames.productType),
                fields.timestamp("expiresDate", transaction.hasExpiresDate ? transaction.expiresDate : nil),
                fields.timestamp("cancellationDate", transaction.hasCancellationDate ? transaction.cancellationDate : nil)
            else { return false }
            fields.bool("isTrialPeriod", transaction.isTrialPeriod)
            fields.string("price", transaction.price)
            fields.string("currencyCode", transaction.currencyCode)
            guard fields.enumeration("cancellationReason", transaction.cancellationReason.rawValue, names: ProtoEnumNames.revocationReason) else { return false }
            fields.string("originalTransactionId", transaction.originalTransactionID)
            if transaction.webOrderLineItemID != 0 {
                // proto3 JSON writes 64-bit integers as strings.
                fields.string("webOrderLineItemId", String(transaction.webOrderLineItemID))
            }
            guard fields.enumeration("transactionReason", transaction.transactionReason.rawValue, names: ProtoEnumNames.transactionReason) else { return false }
            fields.string("subscriptionGroupIdentifier", transaction.subscriptionGroupIdentifier)
            fields.bool("isInIntroOfferPeriod", transaction.isInIntroOfferPeriod)
            fields.bool("isUpgraded", transaction.isUpgraded)
            return true
        }
    }

    private static func appendPayment(_ payment: Storebus_PaymentQueue_V1_Payment, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(payment.unknownFields, to: &out) { fields in
            fields.string("productIdentifier", payment.productIdentifier)
            fields.int32("quantity", payment.quantity)
            fields.string("applicationUsername", payment.applicationUsername)
            if !payment.requestData.isEmpty {
                fields.name("requestData")
                fields.out += Array("\"\(payment.requestData.base64EncodedString())\"".utf8)
            }
            fields.bool("simulatesAskToBuyInSandbox", payment.simulatesAskToBuyInSandbox)
            return true
        }
    }

    private static func appendError(_ error: Storebus_PaymentQueue_V1_StoreKitError, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(error.unknownFields, to: &out) { fields in
            guard fields.enumeration("code", error.code.rawValue, names: ProtoEnumNames.skError) else { return false }
            fields.string("localizedDescription", error.localizedDescription)
            return true
        }
    }

    private static func appendDownload(_ download: Storebus_PaymentQueue_V1_Download, to out: inout [UInt8]) -> Bool {
        // Doubles are written by swift-protobuf's own formatter: a download in progress goes there.
        guard download.progress == 0, download.timeRemainingSeconds == 0, !download.hasError, download.contentURL.isEmpty else { return false }
        return ProtoJSONObject.write(download.unknownFields, to: &out) { fields in
            fields.string("contentIdentifier", download.contentIdentifier)
            fields.string("contentVersion", download.contentVersion)
            if download.contentLength != 0 {
                fields.name("contentLength")
                fields.out += Array("\"\(download.contentLength)\"".utf8)
            }
            fields.string("transactionIdentifier", download.transactionIdentifier)
            return fields.enumeration("state", download.state.rawValue, names: ProtoEnumNames.downloadState)
        }
    }

    private static func appendQueue(_ queue: Storebus_PaymentQueue_V1_QueueRef, to out: inout [UInt8]) -> Bool {
        ProtoJSONObject.write(queue.unknownFields, to: &out) { fields in
            fields.string("appBundleId", queue.appBundleID)
            fields.string("accountId", queue.accountID)
            fields.string("deviceId", queue.deviceID)
            return true
        }
    }
}
