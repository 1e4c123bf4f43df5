import Foundation
import StoreBus
import StoreSchema
import SwiftProtobuf

/// The payment queue's log pages (QueueEventPage) read from their JSON directly: a fast path for
/// the services that follow that log (receipt, notifications, download), behind
/// `STOREBUS_FAST_PATHS`, taken by ``JSONCodec/decode(_:from:)`` (the page is a
/// ``DirectJSONDecodable``), with swift-protobuf's decoder (``JSONCodec/decodePlain(_:from:)``) as
/// its plain twin.
///
/// Each follower read every page through swift-protobuf, which takes JSON a character at a time: a
/// tenth of the receipt service's CPU per purchase, a twelfth of the notification service's. Here a
/// page's records, and the transactions of the events that carry them, are taken from the text
/// member by member with ``JSONScanner``. Only the shapes the payment queue writes are read here.
/// A record's payload of any other shape (another kind of event, a member not known here, an
/// escape in a string, downloads, request data, a number or a time written another way) is read by
/// swift-protobuf on its own; anything else unexpected sends the whole page there. Whatever the
/// text, the page is swift-protobuf's (`QueueEventPageJSONTests`).
enum QueueEventPageJSON {
    typealias Page = Storebus_PaymentQueue_V1_QueueEventPage
    typealias Record = Storebus_PaymentQueue_V1_QueueEventRecord
    typealias Event = Storebus_PaymentQueue_V1_QueueEvent
    typealias Transaction = Storebus_PaymentQueue_V1_PaymentTransaction

    /// The page `json` holds, as swift-protobuf reads it with ``JSONCodec``'s options; nil when it is
    /// left to swift-protobuf.
    static func decode(_ json: [UInt8]) -> Page? {
        Reader(json: json).page()
    }

    /// The JSON names of each message's members read here, in the order the reader's switch takes
    /// them.
    enum Names {
        static let page = names("events", "headSeq", "throughSeq", "shardCount")
        static let record = names("seq", "key", "keySeq", "type", "time", "payload", "shard")
        static let event = names("updatedTransactions", "removedTransactions", "queue")
        static let transactions = names("transactions")
        static let transaction = names(
            "transactionIdentifier", "transactionState", "transactionDate", "payment", "originalTransaction", "error", "storefront", "queue",
            "finished", "productType", "expiresDate", "cancellationDate", "isTrialPeriod", "price", "currencyCode", "cancellationReason",
            "originalTransactionId", "webOrderLineItemId", "transactionReason", "subscriptionGroupIdentifier", "isInIntroOfferPeriod",
            "isUpgraded")
        static let payment = names("productIdentifier", "quantity", "applicationUsername", "simulatesAskToBuyInSandbox")
        static let error = names("code", "localizedDescription")
        static let queue = names("appBundleId", "accountId", "deviceId")

        static func names(_ list: String...) -> [[UInt8]] { list.map { Array($0.utf8) } }
    }

    /// Reads one page's text.
    struct Reader {
        let json: [UInt8]

        /// The index in `names` of the member name at `range`.
        private func field(_ range: Range<Int>, _ names: [[UInt8]]) -> Int? {
            let name = json[range]
            return names.firstIndex { $0.count == name.count && $0.elementsEqual(name) }
        }

        /// The members of the object at `range`, each with its index in `names`: nil when the text is
        /// not such an object, or a member is not among `names`, or comes twice.
        private func members(_ range: Range<Int>, _ names: [[UInt8]]) -> [(field: Int, value: Range<Int>)]? {
            guard let members = JSONScanner.memberRanges(of: json, in: range) else { return nil }
            var seen: UInt64 = 0
            var result: [(field: Int, value: Range<Int>)] = []
            result.reserveCapacity(members.count)
            for member in members {
                guard let field = field(member.name, names), seen & (1 << field) == 0 else { return nil }
                seen |= 1 << field
                result.append((field, member.value))
            }
            return result
        }

        func page() -> Page? {
            guard let members = members(0..<json.count, Names.page) else { return nil }
            var page = Page()
            for (field, value) in members {
                switch field {
                case 0:
                    guard let elements = JSONScanner.elements(of: json, in: value) else { return nil }
                    page.events.reserveCapacity(elements.count)
                    for element in elements {
                        guard let record = record(element) else { return nil }
                        page.events.append(record)
                    }
                case 1:
                    guard let number = unsigned(value) else { return nil }
                    page.headSeq = number
                case 2:
                    guard let number = unsigned(value) else { return nil }
                    page.throughSeq = number
                default:
                    guard let number = unsigned(value).flatMap(UInt32.init(exactly:)) else { return nil }
                    page.shardCount = number
                }
            }
            return page
        }

        /// The least message depth the payload of a record in a page is at (page, record).
        static let payloadDepth = 2

        /// Options for a payload read by swift-protobuf on its own: ``JSONCodec``'s, less the depth
        /// the page and its record take, so that it reads no deeper than within the page.
        static let payloadOptions: JSONDecodingOptions = {
            var options = JSONCodec.decodingOptions
            options.messageDepthLimit -= payloadDepth
            return options
        }()

        private func record(_ range: Range<Int>) -> Record? {
            guard let members = members(range, Names.record) else { return nil }
            var record = Record()
            for (field, value) in members {
                switch field {
                case 0:
                    guard let number = unsigned(value) else { return nil }
                    record.seq = number
                case 1:
                    guard let text = string(value) else { return nil }
                    record.key = text
                case 2:
                    guard let number = unsigned(value) else { return nil }
                    record.keySeq = number
                case 3:
                    guard let text = string(value) else { return nil }
                    record.type = text
                case 4:
                    guard let time = timestamp(value) else { return nil }
                    record.time = time
                case 5:
                    // Another shape of payload: swift-protobuf reads it alone (an object only: a
                    // null leaves the payload unset, which reading it alone would not).
                    guard json[value.lowerBound] == UInt8(ascii: "{") else { return nil }
                    if let event = event(value) {
                        record.payload = event
                    } else {
                        guard let event = try? Event(jsonUTF8Bytes: Array(json[value]), options: Self.payloadOptions) else { return nil }
                        record.payload = event
                    }
                default:
                    guard let number = unsigned(value).flatMap(UInt32.init(exactly:)) else { return nil }
                    record.shard = number
                }
            }
            return record
        }

        private func event(_ range: Range<Int>) -> Event? {
            guard let members = members(range, Names.event) else { return nil }
            var event = Event()
            for (field, value) in members {
                switch field {
                case 0, 1:
                    // One member of the oneof only.
                    guard event.event == nil, let transactions = transactions(value) else { return nil }
                    if field == 0 {
                        event.updatedTransactions = .with { $0.transactions = transactions }
                    } else {
                        event.removedTransactions = .with { $0.transactions = transactions }
                    }
                default:
                    guard let queue = queue(value) else { return nil }
                    event.queue = queue
                }
            }
            return event
        }

        /// The transactions of an updatedTransactions or removedTransactions object.
        private func transactions(_ range: Range<Int>) -> [Transaction]? {
            guard let members = members(range, Names.transactions) else { return nil }
            guard let list = members.first?.value else { return [] }
            guard let elements = JSONScanner.elements(of: json, in: list) else { return nil }
            var transactions: [Transaction] = []
            transactions.reserveCapacity(elements.count)
            for element in elements {
                guard let transaction = transaction(element, nested: false) else { return nil }
                transactions.append(transaction)
            }
            return transactions
        }

        private func transaction(_ range: Range<Int>, nested: Bool) -> Transaction? {
            guard let members = members(range, Names.transaction) else { return nil }
            var transaction = Transaction()
            for (field, value) in members {
                switch field {
                case 0:
                    guard let text = string(value) else { return nil }
                    transaction.transactionIdentifier = text
                case 1:
                    guard let state: Storebus_PaymentQueue_V1_TransactionState = enumeration(value, ProtoEnumNames.transactionState) else { return nil }
                    transaction.transactionState = state
                case 2:
                    guard let time = timestamp(value) else { return nil }
                    transaction.transactionDate = time
                case 3:
                    guard let payment = payment(value) else { return nil }
                    transaction.payment = payment
                case 4:
                    // The payment queue nests one original at most.
                    guard !nested, let original = self.transaction(value, nested: true) else { return nil }
                    transaction.originalTransaction = original
                case 5:
                    guard let error = error(value) else { return nil }
                    transaction.error = error
                case 6:
                    guard let text = string(value) else { return nil }
                    transaction.storefront = text
                case 7:
                    guard let queue = queue(value) else { return nil }
                    transaction.queue = queue
                case 8:
                    guard let flag = bool(value) else { return nil }
                    transaction.finished = flag
                case 9:
                    guard let type: Storebus_Catalog_V1_ProductType = enumeration(value, ProtoEnumNames.productType) else { return nil }
                    transaction.productType = type
                case 10:
                    guard let time = timestamp(value) else { return nil }
                    transaction.expiresDate = time
                case 11:
                    guard let time = timestamp(value) else { return nil }
                    transaction.cancellationDate = time
                case 12:
                    guard let flag = bool(value) else { return nil }
                    transaction.isTrialPeriod = flag
                case 13:
                    guard let text = string(value) else { return nil }
                    transaction.price = text
                case 14:
                    guard let text = string(value) else { return nil }
                    transaction.currencyCode = text
                case 15:
                    guard let reason: Storebus_PaymentQueue_V1_RevocationReason = enumeration(value, ProtoEnumNames.revocationReason) else { return nil }
                    transaction.cancellationReason = reason
                case 16:
                    guard let text = string(value) else { return nil }
                    transaction.originalTransactionID = text
                case 17:
                    guard let number = signed(value) else { return nil }
                    transaction.webOrderLineItemID = number
                case 18:
                    guard let reason: Storebus_PaymentQueue_V1_TransactionReason = enumeration(value, ProtoEnumNames.transactionReason) else { return nil }
                    transaction.transactionReason = reason
                case 19:
                    guard let text = string(value) else { return nil }
                    transaction.subscriptionGroupIdentifier = text
                case 20:
                    guard let flag = bool(value) else { return nil }
                    transaction.isInIntroOfferPeriod = flag
                default:
                    guard let flag = bool(value) else { return nil }
                    transaction.isUpgraded = flag
                }
            }
            return transaction
        }

        private func payment(_ range: Range<Int>) -> Storebus_PaymentQueue_V1_Payment? {
            guard let members = members(range, Names.payment) else { return nil }
            var payment = Storebus_PaymentQueue_V1_Payment()
            for (field, value) in members {
                switch field {
                case 0:
                    guard let text = string(value) else { return nil }
                    payment.productIdentifier = text
                case 1:
                    guard let number = signed(value).flatMap(Int32.init(exactly:)) else { return nil }
                    payment.quantity = number
                case 2:
                    guard let text = string(value) else { return nil }
                    payment.applicationUsername = text
                default:
                    guard let flag = bool(value) else { return nil }
                    payment.simulatesAskToBuyInSandbox = flag
                }
            }
            return payment
        }

        private func error(_ range: Range<Int>) -> Storebus_PaymentQueue_V1_StoreKitError? {
            guard let members = members(range, Names.error) else { return nil }
            var error = Storebus_PaymentQueue_V1_StoreKitError()
            for (field, value) in members {
                if field == 0 {
                    guard let code: Storebus_PaymentQueue_V1_SKError = enumeration(value, ProtoEnumNames.skError) else { return nil }
                    error.code = code
                } else {
                    guard let text = string(value) else { return nil }
                    error.localizedDescription = text
                }
            }
            return error
        }

        private func queue(_ range: Range<Int>) -> Storebus_PaymentQueue_V1_QueueRef? {
            guard let members = members(range, Names.queue) else { return nil }
            var queue = Storebus_PaymentQueue_V1_QueueRef()
            for (field, value) in members {
                guard let text = string(value) else { return nil }
                switch field {
                case 0: queue.appBundleID = text
                case 1: queue.accountID = text
                default: queue.deviceID = text
                }
            }
            return queue
        }

        // MARK: Scalars

        /// A string without escapes, valid UTF-8.
        private func string(_ range: Range<Int>) -> String? {
            guard json[range.lowerBound] == UInt8(ascii: "\"") else { return nil }
            return json.withUnsafeBufferPointer { text in
                let content = UnsafeBufferPointer(rebasing: text[(range.lowerBound + 1)..<(range.upperBound - 1)])
                guard !content.contains(UInt8(ascii: "\\")) else { return nil }
                return String(validating: content, as: UTF8.self)
            }
        }

        private func bool(_ range: Range<Int>) -> Bool? {
            let word = json[range]
            if word.elementsEqual("true".utf8) { return true }
            if word.elementsEqual("false".utf8) { return false }
            return nil
        }

        /// Decimal digits, quoted or bare (proto3 JSON writes 64-bit integers quoted, 32-bit ones
        /// bare), without leading zeros; `negative` allows a minus sign (not before 0).
        private func digits(_ range: Range<Int>, negative: Bool) -> (negative: Bool, magnitude: UInt64)? {
            var digits = range
            if json[range.lowerBound] == UInt8(ascii: "\"") {
                guard range.count >= 3, json[range.upperBound - 1] == UInt8(ascii: "\"") else { return nil }
                digits = (range.lowerBound + 1)..<(range.upperBound - 1)
            }
            var minus = false
            if negative, json[digits.lowerBound] == UInt8(ascii: "-") {
                minus = true
                digits = (digits.lowerBound + 1)..<digits.upperBound
            }
            guard !digits.isEmpty, json[digits.lowerBound] != UInt8(ascii: "0") || (digits.count == 1 && !minus), let value = JSONScanner.decimal(json, digits) else {
                return nil
            }
            return (minus, value)
        }

        private func unsigned(_ range: Range<Int>) -> UInt64? {
            digits(range, negative: false)?.magnitude
        }

        private func signed(_ range: Range<Int>) -> Int64? {
            guard let (negative, magnitude) = digits(range, negative: true) else { return nil }
            if negative { return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
            return Int64(exactly: magnitude)
        }

        /// An enum value written by its name (``ProtoEnumNames``): nil for a number, a name not
        /// among `names`, or its default's.
        private func enumeration<Value: SwiftProtobuf.Enum>(_ range: Range<Int>, _ names: [Int: [UInt8]]) -> Value? {
            ProtoEnumNames.value(named: json[range], in: names).flatMap(Value.init(rawValue:))
        }

        /// An RFC 3339 time in UTC as proto3 JSON writes one: `YYYY-MM-DDTHH:MM:SS`, one to nine
        /// digits of fraction or none, `Z`; years 1 to 9999, days that exist, no leap second.
        private func timestamp(_ range: Range<Int>) -> Google_Protobuf_Timestamp? {
            let count = range.count
            // The quotes, 19 characters of date and time, the Z.
            guard count >= 22, json[range.lowerBound] == UInt8(ascii: "\""), json[range.upperBound - 1] == UInt8(ascii: "\""),
                json[range.upperBound - 2] == UInt8(ascii: "Z")
            else { return nil }
            let start = range.lowerBound + 1
            func number(_ offset: Int, _ length: Int) -> Int? {
                var value = 0
                for index in (start + offset)..<(start + offset + length) {
                    let byte = json[index]
                    guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                    value = value * 10 + Int(byte - UInt8(ascii: "0"))
                }
                return value
            }
            let separators: [(offset: Int, byte: UInt8)] = [(4, UInt8(ascii: "-")), (7, UInt8(ascii: "-")), (10, UInt8(ascii: "T")), (13, UInt8(ascii: ":")), (16, UInt8(ascii: ":"))]
            for separator in separators where json[start + separator.offset] != separator.byte { return nil }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2), let minute = number(14, 2),
                let second = number(17, 2), year >= 1, (1...12).contains(month), day >= 1, day <= Self.days(inMonth: month, of: year), hour < 24, minute < 60,
                second < 60
            else { return nil }
            // The fraction: none, or a point and one to nine digits.
            var nanos = 0
            let fractionStart = start + 19
            let fractionEnd = range.upperBound - 2
            if fractionEnd > fractionStart {
                let digitCount = fractionEnd - fractionStart - 1
                guard json[fractionStart] == UInt8(ascii: "."), (1...9).contains(digitCount), let fraction = number(20, digitCount) else { return nil }
                nanos = fraction
                for _ in digitCount..<9 { nanos *= 10 }
            }
            let seconds = Int64(Self.daysSinceEpoch(year: year, month: month, day: day)) * 86_400 + Int64(hour * 3_600 + minute * 60 + second)
            return Google_Protobuf_Timestamp(seconds: seconds, nanos: Int32(nanos))
        }

        static func days(inMonth month: Int, of year: Int) -> Int {
            switch month {
            case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
            case 4, 6, 9, 11: 30
            default: 31
            }
        }

        /// Days from 1970-01-01 to the given day of the proleptic Gregorian calendar: whole 400-year
        /// cycles of 146,097 days, counted from March so that a leap day ends its year.
        static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
            let marchYear = month <= 2 ? year - 1 : year
            let cycle = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
            let yearOfCycle = marchYear - cycle * 400
            let monthFromMarch = (month + 9) % 12
            let dayOfYear = (153 * monthFromMarch + 2) / 5 + day - 1
            let dayOfCycle = yearOfCycle * 365 + yearOfCycle / 4 - yearOfCycle / 100 + dayOfYear
            // 719,468 days from 0000-03-01 to 1970-01-01.
            return cycle * 146_097 + dayOfCycle - 719_468
        }
    }
}
