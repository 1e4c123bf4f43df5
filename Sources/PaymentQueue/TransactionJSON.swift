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
        let written = object(request.unknownFields, to: &out) { fields in
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

    /// Members of an object being written: each after a comma but the first.
    private struct Fields {
        var out: [UInt8]
        var first = true

        mutating func name(_ name: StaticString) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            first = false
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(UInt8(ascii: "\""))
            out.append(UInt8(ascii: ":"))
        }

        mutating func string(_ name: StaticString, _ value: String) {
            guard !value.isEmpty else { return }
            self.name(name)
            JSONText.appendQuoted(value, to: &out)
        }

        mutating func bool(_ name: StaticString, _ value: Bool) {
            guard value else { return }
            self.name(name)
            out += Array("true".utf8)
        }

        /// An enum by name; false for a value without one.
        mutating func enumeration(_ name: StaticString, _ value: Int, names: [Int: [UInt8]]) -> Bool {
            guard value != 0 else { return true }
            guard let text = names[value] else { return false }
            self.name(name)
            out += text
            return true
        }

        mutating func timestamp(_ name: StaticString, _ value: Google_Protobuf_Timestamp?) -> Bool {
            guard let value else { return true }
            self.name(name)
            return JSONText.appendTimestamp(seconds: value.seconds, nanos: value.nanos, to: &out)
        }

        /// A message field, written by `body` (false: not written here).
        mutating func message(_ name: StaticString, _ body: (inout [UInt8]) -> Bool) -> Bool {
            self.name(name)
            return body(&out)
        }

        /// Ends the object (`{}` when it has no member).
        mutating func close() {
            if first { out.append(UInt8(ascii: "{")) }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Writes one object to `out`, its members by `body`; false, with `out` left partly written, when
    /// the message has unknown fields or `body` gives up (the object is then not one this writer
    /// handles exactly).
    private static func object(_ unknownFields: UnknownStorage, to out: inout [UInt8], _ body: (inout Fields) -> Bool) -> Bool {
        guard unknownFields.data.isEmpty else { return false }
        var fields = Fields(out: [])
        swap(&fields.out, &out)
        // Whatever happens, `out` gets what was written (the caller cuts it back on failure).
        defer { out = fields.out }
        guard body(&fields) else { return false }
        fields.close()
        return true
    }

    /// Appends the transaction's JSON (see ``object(_:to:_:)``).
    private static func appendDirectly(_ transaction: Transaction, to out: inout [UInt8]) -> Bool {
        guard FastPaths.enabled else { return false }
        return object(transaction.unknownFields, to: &out) { fields in
            fields.string("transactionIdentifier", transaction.transactionIdentifier)
            guard fields.enumeration("transactionState", transaction.transactionState.rawValue, names: Names.transactionState),
                fields.timestamp("transactionDate", transaction.hasTransactionDate ? transaction.transactionDate : nil)
            else { return false }
            if transaction.hasPayment, !fields.message("payment", { appendPayment(transaction.payment, to: &$0) }) { return false }
            if transaction.hasOriginalTransaction, !fields.message("originalTransaction", { appendDirectly(transaction.originalTransaction, to: &$0) }) { return false }
            if transaction.hasError, !fields.message("error", { appendError(transaction.error, to: &$0) }) { return false }
            if !transaction.downloads.isEmpty {
                fields.name("downloads")
                fields.out.append(UInt8(ascii: "["))
                for (index, download) in transaction.downloads.enumerated() {
                    if index > 0 { fields.out.append(UInt8(ascii: ",")) }
                    guard appendDownload(download, to: &fields.out) else { return false }
                }
                fields.out.append(UInt8(ascii: "]"))
            }
            fields.string("storefront", transaction.storefront)
            if transaction.hasQueue, !fields.message("queue", { appendQueue(transaction.queue, to: &$0) }) { return false }
            fields.bool("finished", transaction.finished)
            guard fields.enumeration("productType", transaction.productType.rawValue, names: Names.productType),
                fields.timestamp("expiresDate", transaction.hasExpiresDate ? transaction.expiresDate : nil),
                fields.timestamp("cancellationDate", transaction.hasCancellationDate ? transaction.cancellationDate : nil)
            else { return false }
            fields.bool("isTrialPeriod", transaction.isTrialPeriod)
            fields.string("price", transaction.price)
            fields.string("currencyCode", transaction.currencyCode)
            guard fields.enumeration("cancellationReason", transaction.cancellationReason.rawValue, names: Names.revocationReason) else { return false }
            fields.string("originalTransactionId", transaction.originalTransactionID)
            if transaction.webOrderLineItemID != 0 {
                // proto3 JSON writes 64-bit integers as strings.
                fields.string("webOrderLineItemId", String(transaction.webOrderLineItemID))
            }
            guard fields.enumeration("transactionReason", transaction.transactionReason.rawValue, names: Names.transactionReason) else { return false }
            fields.string("subscriptionGroupIdentifier", transaction.subscriptionGroupIdentifier)
            fields.bool("isInIntroOfferPeriod", transaction.isInIntroOfferPeriod)
            fields.bool("isUpgraded", transaction.isUpgraded)
            return true
        }
    }

    private static func appendPayment(_ payment: Storebus_PaymentQueue_V1_Payment, to out: inout [UInt8]) -> Bool {
        object(payment.unknownFields, to: &out) { fields in
            fields.string("productIdentifier", payment.productIdentifier)
            if payment.quantity != 0 {
                fields.name("quantity")
                fields.out += Array(String(payment.quantity).utf8)
            }
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
        object(error.unknownFields, to: &out) { fields in
            guard fields.enumeration("code", error.code.rawValue, names: Names.skError) else { return false }
            fields.string("localizedDescription", error.localizedDescription)
            return true
        }
    }

    private static func appendDownload(_ download: Storebus_PaymentQueue_V1_Download, to out: inout [UInt8]) -> Bool {
        // Doubles are written by swift-protobuf's own formatter: a download in progress goes there.
        guard download.progress == 0, download.timeRemainingSeconds == 0, !download.hasError, download.contentURL.isEmpty else { return false }
        return object(download.unknownFields, to: &out) { fields in
            fields.string("contentIdentifier", download.contentIdentifier)
            fields.string("contentVersion", download.contentVersion)
            if download.contentLength != 0 {
                fields.name("contentLength")
                fields.out += Array("\"\(download.contentLength)\"".utf8)
            }
            fields.string("transactionIdentifier", download.transactionIdentifier)
            return fields.enumeration("state", download.state.rawValue, names: Names.downloadState)
        }
    }

    private static func appendQueue(_ queue: Storebus_PaymentQueue_V1_QueueRef, to out: inout [UInt8]) -> Bool {
        object(queue.unknownFields, to: &out) { fields in
            fields.string("appBundleId", queue.appBundleID)
            fields.string("accountId", queue.accountID)
            fields.string("deviceId", queue.deviceID)
            return true
        }
    }

    /// Each enum value's JSON name, quoted, as swift-protobuf writes it (asked of swift-protobuf once,
    /// so the names cannot drift from the generated code).
    enum Names {
        static let transactionState = names(Storebus_PaymentQueue_V1_TransactionState.allCases) { value in
            try Transaction.with { $0.transactionState = value }.jsonUTF8Bytes()
        }
        static let productType = names(Storebus_Catalog_V1_ProductType.allCases) { value in
            try Transaction.with { $0.productType = value }.jsonUTF8Bytes()
        }
        static let skError = names(Storebus_PaymentQueue_V1_SKError.allCases) { value in
            try Storebus_PaymentQueue_V1_StoreKitError.with { $0.code = value }.jsonUTF8Bytes()
        }
        static let revocationReason = names(Storebus_PaymentQueue_V1_RevocationReason.allCases) { value in
            try Transaction.with { $0.cancellationReason = value }.jsonUTF8Bytes()
        }
        static let transactionReason = names(Storebus_PaymentQueue_V1_TransactionReason.allCases) { value in
            try Transaction.with { $0.transactionReason = value }.jsonUTF8Bytes()
        }
        static let downloadState = names(Storebus_PaymentQueue_V1_DownloadState.allCases) { value in
            try Storebus_PaymentQueue_V1_Download.with { $0.state = value }.jsonUTF8Bytes()
        }

        /// The value of the one member of each `{"field":"NAME"}` that `encode` writes, by raw value.
        private static func names<E: SwiftProtobuf.Enum>(_ cases: [E], _ encode: (E) throws -> [UInt8]) -> [Int: [UInt8]] {
            var names: [Int: [UInt8]] = [:]
            for value in cases where value.rawValue != 0 {
                guard let json = try? encode(value), let colon = json.firstIndex(of: UInt8(ascii: ":")),
                    json.last == UInt8(ascii: "}")
                else { continue }
                names[value.rawValue] = Array(json[(colon + 1)..<(json.count - 1)])
            }
            return names
        }
    }
}
