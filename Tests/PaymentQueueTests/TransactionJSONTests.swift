import Foundation
import StoreBusStorage
import StoreBusTesting
import StoreSchema
import SwiftProtobuf
import Testing

@testable import PaymentQueue

@Suite("Transactions' JSON written directly, byte for byte as swift-protobuf writes it")
struct TransactionJSONTests {
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    /// Random text mixing what JSON escapes (quote, backslash, C0 and C1 controls, DEL) with ASCII,
    /// two-, three- and four-byte UTF-8.
    static func text<G: RandomNumberGenerator>(_ generator: inout G) -> String {
        let pieces: [String] = [
            "a", "Z", "0", " ", "\"", "\\", "/", "\u{0}", "\u{8}", "\u{9}", "\u{A}", "\u{C}", "\u{D}", "\u{1F}",
            "\u{7F}", "\u{80}", "\u{9F}", "\u{A0}", "é", "\u{2028}", "€", "😀", "{", "}"
        ]
        guard Int.random(in: 0..<4, using: &generator) > 0 else { return "" }
        return (0..<Int.random(in: 1..<12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    static func timestamp<G: RandomNumberGenerator>(_ generator: inout G) -> Google_Protobuf_Timestamp {
        let seconds = Int64.random(in: -62_135_596_800...253_402_300_799, using: &generator)
        let nanos: Int32
        switch Int.random(in: 0..<4, using: &generator) {
        case 0: nanos = 0
        case 1: nanos = Int32.random(in: 0..<1000, using: &generator) * 1_000_000
        case 2: nanos = Int32.random(in: 0..<1_000_000, using: &generator) * 1000
        default: nanos = Int32.random(in: 0..<1_000_000_000, using: &generator)
        }
        return Google_Protobuf_Timestamp(seconds: seconds, nanos: nanos)
    }

    static func transaction<G: RandomNumberGenerator>(_ generator: inout G, depth: Int = 0) -> Transaction {
        func maybe() -> Bool { Bool.random(using: &generator) }
        var transaction = Transaction()
        transaction.transactionIdentifier = text(&generator)
        transaction.transactionState = Storebus_PaymentQueue_V1_TransactionState.allCases.randomElement(using: &generator)!
        if maybe() { transaction.transactionDate = timestamp(&generator) }
        if maybe() {
            transaction.payment = .with {
                $0.productIdentifier = text(&generator)
                $0.quantity = maybe() ? Int32.random(in: -5...10, using: &generator) : 0
                $0.applicationUsername = text(&generator)
                $0.requestData = Data((0..<Int.random(in: 0..<7, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) })
                $0.simulatesAskToBuyInSandbox = maybe()
            }
        }
        if depth == 0 && maybe() { transaction.originalTransaction = Self.transaction(&generator, depth: 1) }
        if maybe() {
            transaction.error = .with {
                $0.code = Storebus_PaymentQueue_V1_SKError.allCases.randomElement(using: &generator)!
                $0.localizedDescription = text(&generator)
            }
        }
        for _ in 0..<Int.random(in: 0..<3, using: &generator) {
            transaction.downloads.append(
                .with {
                    $0.contentIdentifier = text(&generator)
                    $0.contentVersion = text(&generator)
                    $0.contentLength = maybe() ? Int64.random(in: -1...Int64.max, using: &generator) : 0
                    $0.transactionIdentifier = text(&generator)
                    $0.state = Storebus_PaymentQueue_V1_DownloadState.allCases.randomElement(using: &generator)!
                    // In progress now and then: written by swift-protobuf (the doubles).
                    if Int.random(in: 0..<8, using: &generator) == 0 { $0.progress = Double.random(in: 0...1, using: &generator) }
                })
        }
        transaction.storefront = text(&generator)
        if maybe() {
            transaction.queue = .with {
                $0.appBundleID = text(&generator); $0.accountID = text(&generator); $0.deviceID = text(&generator)
            }
        }
        transaction.finished = maybe()
        transaction.productType = Storebus_Catalog_V1_ProductType.allCases.randomElement(using: &generator)!
        if maybe() { transaction.expiresDate = timestamp(&generator) }
        if maybe() { transaction.cancellationDate = timestamp(&generator) }
        transaction.isTrialPeriod = maybe()
        return transaction
    }

    @Test("5,000 random transactions, nested originals, escapes and times of every precision: the same bytes, alone and in an AddPayment answer")
    func randomTransactions() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let transaction = Self.transaction(&generator)
            let expected: [UInt8] = try transaction.jsonUTF8Bytes()
            let written = try TransactionJSON.encode(transaction)
            // Compared as text, so that a failure reads as JSON.
            #expect(written == expected, "\(String(decoding: written, as: UTF8.self)) instead of \(String(decoding: expected, as: UTF8.self))")
            if written != expected { break }
            let response = Storebus_PaymentQueue_V1_AddPaymentResponse.with { $0.transaction = transaction }
            #expect(try TransactionJSON.addPaymentResponse(transaction) == response.jsonUTF8Bytes() as [UInt8])
        }
    }

    @Test("5,000 random AddPayment requests, the idempotency digest: the same text as swift-protobuf's jsonString(), unknown fields through it")
    func addPaymentRequests() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            // Payments and queues as the random transactions carry them.
            let transaction = Self.transaction(&generator)
            var request = Storebus_PaymentQueue_V1_AddPaymentRequest()
            if transaction.hasQueue { request.queue = transaction.queue }
            if transaction.hasPayment { request.payment = transaction.payment }
            request.storefront = Self.text(&generator)
            request.idempotencyKey = Self.text(&generator)
            let written = try TransactionJSON.string(request)
            let expected = try request.jsonString()
            #expect(written == expected)
            if written != expected { break }
        }
        var request = Storebus_PaymentQueue_V1_AddPaymentRequest.with {
            $0.storefront = "FRA"; $0.payment.productIdentifier = "coins"
        }
        var binary: [UInt8] = try request.serializedBytes()
        binary += [0x98, 0x06, 0x01]
        request = try Storebus_PaymentQueue_V1_AddPaymentRequest(serializedBytes: binary)
        #expect(try TransactionJSON.string(request) == request.jsonString())
    }

    @Test("queue events announcing updated or removed transactions: the same bytes as the QueueEvent message's")
    func queueEvents() throws {
        var generator = SystemRandomNumberGenerator()
        for count in [0, 1, 2, 3, 1, 2] {
            for removed in [false, true] {
                let transactions = (0..<count).map { _ in Self.transaction(&generator) }
                let queue = Storebus_PaymentQueue_V1_QueueRef.with {
                    $0.appBundleID = "com.example.app"; $0.accountID = Self.text(&generator); $0.deviceID = ""
                }
                var event = Storebus_PaymentQueue_V1_QueueEvent()
                event.queue = queue
                if removed { event.removedTransactions.transactions = transactions } else { event.updatedTransactions.transactions = transactions }
                #expect(try Self.queueEvent(transactions, removed: removed, queue: queue) == event.jsonString())
            }
        }
        // A queue with unknown fields (from a binary peer) goes through swift-protobuf, in place of
        // what the writer had begun.
        var binary: [UInt8] = try Storebus_PaymentQueue_V1_QueueRef.with {
            $0.appBundleID = "com.example.app"; $0.accountID = "a"
        }.serializedBytes()
        binary += [0x98, 0x06, 0x01]
        let queue = try Storebus_PaymentQueue_V1_QueueRef(serializedBytes: binary)
        let transactions = [Self.transaction(&generator)]
        var event = Storebus_PaymentQueue_V1_QueueEvent()
        event.queue = queue
        event.updatedTransactions.transactions = transactions
        #expect(try Self.queueEvent(transactions, removed: false, queue: queue) == event.jsonString())
    }

    /// The queue event as ``TransactionJSON/appendQueueEvent(_:removed:queue:to:)`` appends it after
    /// other bytes, which it leaves as they were.
    static func queueEvent(_ transactions: [Storebus_PaymentQueue_V1_PaymentTransaction], removed: Bool, queue: Storebus_PaymentQueue_V1_QueueRef) throws -> String {
        let before = Array("before".utf8)
        var out = before
        try TransactionJSON.appendQueueEvent(transactions, removed: removed, queue: queue, to: &out)
        #expect(Array(out.prefix(before.count)) == before)
        return String(decoding: out.dropFirst(before.count), as: UTF8.self)
    }

    @Test("what the writer cannot write exactly goes through swift-protobuf: unknown fields, unnamed enum values, times out of range")
    func fallbacks() throws {
        var generator = SystemRandomNumberGenerator()
        var base = Self.transaction(&generator)
        base.transactionDate = Google_Protobuf_Timestamp(seconds: 1_795_222_923, nanos: 456_000_000)
        // An unknown field (number 99, varint 1), as a newer peer's binary message would keep it.
        var binary: [UInt8] = try base.serializedBytes()
        binary += [0x98, 0x06, 0x01]
        let withUnknown = try Transaction(serializedBytes: binary)
        #expect(!withUnknown.unknownFields.data.isEmpty)
        var unnamed = base
        unnamed.transactionState = .UNRECOGNIZED(42)
        for transaction in [withUnknown, unnamed] {
            let expected: [UInt8] = try transaction.jsonUTF8Bytes()
            #expect(try TransactionJSON.encode(transaction) == expected)
        }
        var outOfRange = base
        outOfRange.transactionDate = Google_Protobuf_Timestamp(seconds: 253_402_300_800, nanos: 0)
        #expect(throws: (any Error).self) { _ = try TransactionJSON.encode(outOfRange) }
    }

    @Test("timestamps at the edges of proto3 JSON's range: written as swift-protobuf writes them, or refused")
    func timestampEdges() throws {
        for (seconds, nanos) in [(Int64(-62_135_596_800), Int32(0)), (253_402_300_799, 999_999_999), (0, 0), (-1, 1), (951_782_400, 5_000), (1_795_222_923, 450_000_000)] {
            var out: [UInt8] = []
            #expect(JSONText.appendTimestamp(seconds: seconds, nanos: nanos, to: &out))
            let expected: [UInt8] = try Google_Protobuf_Timestamp(seconds: seconds, nanos: nanos).jsonUTF8Bytes()
            #expect(out == expected, "\(String(decoding: out, as: UTF8.self))")
        }
        for (seconds, nanos) in [(Int64(-62_135_596_801), Int32(0)), (253_402_300_800, 0), (0, -1), (0, 1_000_000_000)] {
            var out: [UInt8] = []
            #expect(!JSONText.appendTimestamp(seconds: seconds, nanos: nanos, to: &out) && out.isEmpty)
        }
    }

    @Test("the writer covers every field proto-schemas/ gives the messages it writes")
    func coversEveryField() throws {
        for (message, written) in TransactionJSON.fieldsWritten {
            let numbers = try protoFieldNumbers(of: message, in: "storebus/payment_queue/v1/payment_queue.proto")
            #expect(numbers == written, "\(message): proto-schemas/ has fields \(numbers); TransactionJSON writes \(written)")
        }
    }
}
