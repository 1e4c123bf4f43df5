import Foundation
import StoreBus
import StoreBusTesting
import StoreSchema
import SwiftProtobuf
import Testing

@testable import StoreBusServer

/// The payment queue's log pages read directly (fast path) against swift-protobuf, their plain twin.
@Suite("Payment queue log pages read directly, as swift-protobuf reads them")
struct QueueEventPageJSONTests {
    typealias Page = Storebus_PaymentQueue_V1_QueueEventPage
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    /// Text as the payment queue's names and ids are: no escapes, sometimes beyond ASCII.
    static func plain<G: RandomNumberGenerator>(_ generator: inout G) -> String {
        let pieces = ["a", "Z", "0", "9", ".", "-", "_", " ", "/", "é", "€", "😀", "com.example"]
        guard Int.random(in: 0..<5, using: &generator) > 0 else { return "" }
        return (0..<Int.random(in: 1..<10, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
    }

    /// A transaction the payment queue could write: every member set or not at random, times of
    /// every precision, every enum value, one nested original at most, no downloads.
    static func transaction<G: RandomNumberGenerator>(_ generator: inout G, depth: Int = 0) -> Transaction {
        func maybe() -> Bool { Bool.random(using: &generator) }
        var transaction = Transaction()
        if maybe() { transaction.transactionIdentifier = String(UInt64.random(in: 0...UInt64.max, using: &generator)) }
        transaction.transactionState = Storebus_PaymentQueue_V1_TransactionState.allCases.randomElement(using: &generator)!
        if maybe() { transaction.transactionDate = TransactionJSONTests.timestamp(&generator) }
        if maybe() {
            transaction.payment = .with {
                $0.productIdentifier = plain(&generator)
                $0.quantity = maybe() ? Int32.random(in: Int32.min...Int32.max, using: &generator) : Int32.random(in: 0...10, using: &generator)
                $0.applicationUsername = plain(&generator)
                $0.simulatesAskToBuyInSandbox = maybe()
            }
        }
        if depth == 0 && maybe() { transaction.originalTransaction = Self.transaction(&generator, depth: 1) }
        if maybe() {
            transaction.error = .with {
                $0.code = Storebus_PaymentQueue_V1_SKError.allCases.randomElement(using: &generator)!
                $0.localizedDescription = plain(&generator)
            }
        }
        transaction.storefront = plain(&generator)
        if maybe() {
            transaction.queue = .with {
                $0.appBundleID = plain(&generator); $0.accountID = plain(&generator); $0.deviceID = plain(&generator)
            }
        }
        transaction.finished = maybe()
        transaction.productType = Storebus_Catalog_V1_ProductType.allCases.randomElement(using: &generator)!
        if maybe() { transaction.expiresDate = TransactionJSONTests.timestamp(&generator) }
        if maybe() { transaction.cancellationDate = TransactionJSONTests.timestamp(&generator) }
        transaction.isTrialPeriod = maybe()
        transaction.price = maybe() ? "0.99" : plain(&generator)
        transaction.currencyCode = plain(&generator)
        transaction.cancellationReason = Storebus_PaymentQueue_V1_RevocationReason.allCases.randomElement(using: &generator)!
        transaction.originalTransactionID = plain(&generator)
        if maybe() { transaction.webOrderLineItemID = [Int64.min, -1, 1, Int64.max, Int64.random(in: Int64.min...Int64.max, using: &generator)].randomElement(using: &generator)! }
        transaction.transactionReason = Storebus_PaymentQueue_V1_TransactionReason.allCases.randomElement(using: &generator)!
        transaction.subscriptionGroupIdentifier = plain(&generator)
        transaction.isInIntroOfferPeriod = maybe()
        transaction.isUpgraded = maybe()
        return transaction
    }

    /// A page of records: mostly transactions updated or removed (now and then with escapes,
    /// downloads or request data, which are left to swift-protobuf), some events of other kinds.
    static func page<G: RandomNumberGenerator>(_ generator: inout G) -> Page {
        var page = Page()
        for index in 0..<Int.random(in: 0..<6, using: &generator) {
            var record = Storebus_PaymentQueue_V1_QueueEventRecord()
            record.seq = UInt64.random(in: 0...UInt64.max, using: &generator) >> UInt64.random(in: 0...63, using: &generator)
            record.key = plain(&generator)
            record.keySeq = UInt64(index)
            record.type = "storebus.payment_queue.v1.QueueEvent"
            if Bool.random(using: &generator) { record.time = TransactionJSONTests.timestamp(&generator) }
            if Bool.random(using: &generator) { record.shard = UInt32.random(in: 0...UInt32.max, using: &generator) }
            let transactions = (0..<Int.random(in: 0..<3, using: &generator)).map { _ in
                Int.random(in: 0..<8, using: &generator) == 0 ? TransactionJSONTests.transaction(&generator) : transaction(&generator)
            }
            switch Int.random(in: 0..<8, using: &generator) {
            case 0: record.payload.refundedTransactions.transactions = transactions
            case 1: record.payload.subscriptionChanged.subscription = .with { $0.originalTransactionIdentifier = plain(&generator) }
            case 2: record.payload.historyCleared = .with { $0.accountID = plain(&generator) }
            case 3: break
            case 4, 5: record.payload.removedTransactions.transactions = transactions
            default: record.payload.updatedTransactions.transactions = transactions
            }
            if Bool.random(using: &generator) {
                record.payload.queue = .with {
                    $0.appBundleID = plain(&generator); $0.accountID = plain(&generator)
                }
            }
            page.events.append(record)
        }
        if Bool.random(using: &generator) { page.headSeq = UInt64.random(in: 0...UInt64.max, using: &generator) }
        if Bool.random(using: &generator) { page.throughSeq = UInt64.random(in: 0...1_000, using: &generator) }
        if Bool.random(using: &generator) { page.shardCount = UInt32.random(in: 0...16, using: &generator) }
        return page
    }

    /// `json` with the members of every object in a random order (as the event log's records keep
    /// theirs: the shard second), the same message to swift-protobuf.
    static func shuffled<G: RandomNumberGenerator>(_ json: [UInt8], _ range: Range<Int>, _ generator: inout G) -> [UInt8] {
        if let members = JSONScanner.memberRanges(of: json, in: range) {
            let parts = members.shuffled(using: &generator).map { member in
                Array("\"".utf8) + json[member.name] + Array("\":".utf8) + shuffled(json, member.value, &generator)
            }
            return Array("{".utf8) + Array(parts.joined(separator: Array(",".utf8))) + Array("}".utf8)
        }
        if json[range.lowerBound] == UInt8(ascii: "["), let elements = JSONScanner.elements(of: json, in: range) {
            return Array("[".utf8) + Array(elements.map { shuffled(json, $0, &generator) }.joined(separator: Array(",".utf8))) + Array("]".utf8)
        }
        return Array(json[range])
    }

    /// Checks that the direct reader gives swift-protobuf's page or leaves it to swift-protobuf, and
    /// that a follower's reading gives swift-protobuf's answer; returns whether it was read directly.
    @discardableResult
    static func check(_ json: [UInt8], _ comment: @autoclosure () -> String = "") -> Bool {
        let plain = try? JSONCodec.decodePlain(Page.self, from: json)
        let direct = QueueEventPageJSON.decode(json)
        if let direct {
            #expect(direct == plain, "\(comment()) \(String(decoding: json.prefix(300), as: UTF8.self))")
        }
        #expect((try? JSONCodec.decode(Page.self, from: json)) == plain, "\(comment()) \(String(decoding: json.prefix(300), as: UTF8.self))")
        return direct != nil
    }

    @Test("3,000 random pages, as swift-protobuf writes them and with members in any order: read directly, each is swift-protobuf's page; most are read directly")
    func randomPages() throws {
        var generator = SeededRandom(seed: 3_000)
        var direct = 0
        for index in 0..<3_000 {
            let page = Self.page(&generator)
            let json: [UInt8] = try page.jsonUTF8Bytes()
            #expect(QueueEventPageJSON.decode(json) == page || QueueEventPageJSON.decode(json) == nil)
            if Self.check(json, "page \(index)") { direct += 1 }
            Self.check(Self.shuffled(json, 0..<json.count, &generator), "page \(index) shuffled")
        }
        #expect(direct > 2_000, "\(direct) of 3,000 read directly")
    }

    @Test("damaged pages (bytes changed, cut short): read directly only as swift-protobuf reads them, refused where it refuses them")
    func damagedPages() throws {
        var generator = SeededRandom(seed: 77)
        let alphabet = Array("{}[]\":,.-+0123456789eEtrufalsnZT \\".utf8)
        for _ in 0..<3_000 {
            var json: [UInt8] = try Self.page(&generator).jsonUTF8Bytes()
            guard json.count > 2 else { continue }
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let at = Int.random(in: 0..<json.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: json[at] = alphabet.randomElement(using: &generator)!
                case 1: json.remove(at: at)
                default: json.insert(alphabet.randomElement(using: &generator)!, at: at)
                }
            }
            Self.check(json)
            Self.check(Array(json.prefix(Int.random(in: 0..<json.count, using: &generator))))
        }
    }

    @Test("numbers, times, enums and nulls in the forms the direct reader leaves to swift-protobuf, and those it reads")
    func edgeForms() {
        let record = #"{"seq":"1","key":"q","keySeq":"1","type":"t","payload":{"updatedTransactions":{"transactions":[TX]}}}"#
        func page(_ transaction: String, head: String = #""7""#) -> [UInt8] {
            Array(#"{"events":[\#(record.replacingOccurrences(of: "TX", with: transaction))],"headSeq":\#(head)}"#.utf8)
        }
        let transactions = [
            #"{"transactionIdentifier":"1"}"#, #"{"transactionIdentifier":"1","transactionIdentifier":"2"}"#,
            #"{"transactionState":"TRANSACTION_STATE_PURCHASED"}"#, #"{"transactionState":"TRANSACTION_STATE_UNSPECIFIED"}"#, #"{"transactionState":2}"#,
            #"{"transactionState":"NOPE"}"#, #"{"transaction_identifier":"1"}"#, #"{"transactionIdentifier":null}"#,
            #"{"transactionIdentifier":"a\"b"}"#, #"{"transactionIdentifier":"a\u00e9"}"#, #"{"unknownMember":1}"#,
            #"{"transactionDate":"2026-11-30T19:04:05Z"}"#, #"{"transactionDate":"2026-11-30T19:04:05.1Z"}"#,
            #"{"transactionDate":"2026-11-30T19:04:05.123456789Z"}"#, #"{"transactionDate":"2026-11-30T19:04:05.1234567891Z"}"#,
            #"{"transactionDate":"2024-02-29T00:00:00Z"}"#, #"{"transactionDate":"2026-02-29T00:00:00Z"}"#, #"{"transactionDate":"2026-11-30T23:59:60Z"}"#,
            #"{"transactionDate":"2026-11-30T19:04:05+01:00"}"#, #"{"transactionDate":"2026-11-30t19:04:05z"}"#, #"{"transactionDate":"0001-01-01T00:00:00Z"}"#,
            #"{"transactionDate":"9999-12-31T23:59:59.999999999Z"}"#, #"{"transactionDate":"1969-12-31T23:59:59.5Z"}"#, #"{"transactionDate":"0000-01-01T00:00:00Z"}"#,
            #"{"transactionDate":"2026-11-30T19:04:05.Z"}"#, #"{"transactionDate":null}"#, #"{"payment":{}}"#, #"{"payment":null}"#,
            #"{"payment":{"quantity":3}}"#, #"{"payment":{"quantity":"3"}}"#, #"{"payment":{"quantity":-2147483648}}"#, #"{"payment":{"quantity":2147483648}}"#,
            #"{"payment":{"quantity":03}}"#, #"{"payment":{"quantity":3.0}}"#, #"{"payment":{"quantity":-0}}"#, #"{"payment":{"requestData":"AQI="}}"#,
            #"{"webOrderLineItemId":"-9223372036854775808"}"#, #"{"webOrderLineItemId":"9223372036854775808"}"#, #"{"webOrderLineItemId":"007"}"#,
            #"{"webOrderLineItemId":12}"#, #"{"finished":true,"isUpgraded":false}"#, #"{"finished":"true"}"#, #"{"finished":1}"#,
            #"{"originalTransaction":{"originalTransaction":{"transactionIdentifier":"3"}}}"#, #"{"downloads":[]}"#,
            #"{"error":{"code":"SK_ERROR_PAYMENT_CANCELLED","localizedDescription":"x"}}"#, #"{"queue":{"appBundleId":"a","extra":"b"}}"#
        ]
        for transaction in transactions {
            // A payload the reader does not take is swift-protobuf's alone: the page is read directly
            // whenever swift-protobuf reads it.
            let readable = (try? JSONCodec.decodePlain(Page.self, from: page(transaction))) != nil
            #expect(Self.check(page(transaction), transaction) == readable, "\(transaction)")
        }
        for head in [#""0""#, "0", #""01""#, "18446744073709551615", "18446744073709551616", #""-1""#, "null", "1e3"] {
            Self.check(page(#"{}"#, head: head), head)
        }
        for json in [
            #"{"events":[{"seq":"1","payload":null}]}"#, #"{"events":[{"seq":"1","payload":[]}]}"#, #"{"events":null}"#, #"{"shardCount":4294967296}"#,
            #"{"shardCount":4294967295}"#, #"{"events":[{"payload":{"updatedTransactions":{},"removedTransactions":{}}}]}"#,
            #"{"events":[{"payload":{"refundedTransactions":{"transactions":[{"transactionIdentifier":"1"}]}}}]}"#, "", "{}", " { } ", "[]",
            #"{"events":[{"key":"\ud800"}]}"#, #"{"events":[{"time":"2026-11-30T19:04:05Z"}]}"#, #"{"events":[{"shard":7,"seq":"2"}]}"#
        ] {
            Self.check(Array(json.utf8), json)
        }
        // Invalid UTF-8 in a string.
        Self.check(Array(#"{"events":[{"key":""#.utf8) + [0xC3, 0x28] + Array(#""}]}"#.utf8))
    }

    @Test("20,000 random times, years 1 to 9999, every precision: read directly as swift-protobuf reads them")
    func times() throws {
        var generator = SeededRandom(seed: 400)
        for _ in 0..<20_000 {
            let time = TransactionJSONTests.timestamp(&generator)
            let page = Page.with { $0.events = [.with { $0.time = time }] }
            let json: [UInt8] = try page.jsonUTF8Bytes()
            #expect(QueueEventPageJSON.decode(json) == page, "\(String(decoding: json, as: UTF8.self))")
        }
    }
}
