import Foundation
import GRDB
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
                if id % 5 == 2 { $0.queue.deviceID = "e" }
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
        refunded.cancellationReason = .appIssue
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
            // What a verification answers beside each entry: read in place, as the plain path reads it.
            let known = try await store.knownPurchases(app: queue.appBundleID, account: queue.accountID, direct: true)
            let knownPlain = try await store.knownPurchases(app: queue.appBundleID, account: queue.accountID, direct: false)
            #expect(known == knownPlain, "\(when)")
        }
        for (seq, event) in events.enumerated() {
            try await database.write { db in try ReceiptStore.apply(db, event, seq: UInt64(seq + 1)) }
            try await compare("after event \(seq + 1)")
        }
        let known = try await store.knownPurchases(app: queue.appBundleID, account: queue.accountID, direct: true)
        #expect(known.count == 14 && known["1004"]?.cancellationReason == .appIssue && known["1007"]?.device == "e" && known["1008"]?.device == "d")
        // Rows from before attributes were kept are encoded when a receipt needs them
        try await database.write { db in try db.execute(cached: "UPDATE rc_transaction SET entry = NULL WHERE CAST(id AS INTEGER) % 2 = 0") }
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
        // A receipt reads the held purchases' index, not every purchase of the account.
        let plans = try await database.pool.read { db in
            try [ReceiptStore.keptEntriesSQL.sql, "SELECT id FROM rc_transaction WHERE \(ReceiptStore.held) AND entry IS NULL"].map { sql in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql.replacingOccurrences(of: "?", with: "'x'")).map { $0["detail"] as String }.joined(separator: "; ")
            }
        }
        for plan in plans { #expect(plan.contains("rc_transaction_held"), "\(plan)") }
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

extension AppleJSONTests {
    @Test("verifyReceipt's purchases written directly: the same bytes as each purchase's JSONObjectWriter, whatever the purchase holds")
    func purchasesDirectlyMatchTheirWriters() throws {
        var random = SeededRandom(seed: 77)
        let ids = ["com.storebus.coins", "com.storebus.\"quoted\"", "línea\nnueva", "\u{1}\u{7f}", "🎉", ""]
        // Instants around both of the Pacific time zone's changes of 2026, far years, a fraction
        func instant() -> Date {
            let picks: [Double] = [1_772_964_000, 1_793_523_600, 0, -62_135_596_800, 253_402_300_799, 1_764_000_000.75]
            return Date(timeIntervalSince1970: picks.randomElement(using: &random)! + Double(Int.random(in: -7_200...7_200, using: &random)))
        }
        func known() -> KnownPurchase? {
            guard Bool.random(using: &random) else { return nil }
            return KnownPurchase(
                cancellationReason: Storebus_PaymentQueue_V1_RevocationReason(rawValue: Int.random(in: 0...3, using: &random)) ?? .unspecified,
                device: "d", isUpgraded: Bool.random(using: &random))
        }
        var purchases: [(InAppPurchaseEntry, KnownPurchase?)] = []
        for _ in 0..<400 {
            let entry = InAppPurchaseEntry(
                quantity: Int.random(in: 1...10, using: &random), productID: ids.randomElement(using: &random)!,
                transactionID: ids.randomElement(using: &random)!, originalTransactionID: String(Int.random(in: 0...Int.max, using: &random)),
                purchaseDate: instant(), originalPurchaseDate: instant(), productType: Int.random(in: 0...3, using: &random),
                expiresDate: Bool.random(using: &random) ? instant() : nil,
                webOrderLineItemID: Bool.random(using: &random) ? Int64.random(in: 0...Int64.max, using: &random) : nil,
                cancellationDate: Bool.random(using: &random) ? instant() : nil, isTrialPeriod: Bool.random(using: &random),
                isInIntroOfferPeriod: Bool.random(using: &random))
            let stored = known()
            var direct: [UInt8] = []
            AppleDates.appendInApp(entry, known: stored, to: &direct)
            #expect(direct == AppleDates.inApp(entry, known: stored).json, "\(String(decoding: direct, as: UTF8.self))")
            purchases.append((entry, stored))
        }
        // The array, in an answer, against the writers' array with fast paths off
        for count in [0, 1, 2, 400] {
            var direct = JSONObjectWriter(), plain = JSONObjectWriter()
            AppleDates.setInApp("in_app", Array(purchases.prefix(count)), to: &direct, directly: true)
            AppleDates.setInApp("in_app", Array(purchases.prefix(count)), to: &plain, directly: false)
            #expect(direct.json == plain.json, "\(count) purchases")
        }
    }
}

/// The receipt's signed message with its payload put in by hand against swift-certificates' own.
struct ReceiptSignatureTests {
    @Test("payloads of 0 bytes to 300 KB signed detached and spliced: canonical DER as swift-certificates writes it, the payload attached, the signature valid")
    func splicedMatchesAttached() async throws {
        let directory = try TemporaryDirectory(prefix: "splice")
        defer { directory.remove() }
        let authority = try SigningAuthority(directory: directory.url)
        let key = try authority.current()
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        var random = SeededRandom(seed: 5)
        for size in [0, 1, 127, 128, 255, 256, 65_535, 65_536, 300_000] {
            let payload = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
            let spliced = try ReceiptSignature.sign(payload: payload, with: key, at: now, spliced: true)
            let plain = try ReceiptSignature.sign(payload: payload, with: key, at: now, spliced: false)
            // Both carry the payload and verify against the root
            #expect(try ReceiptSignature.attachedPayload(of: spliced) == payload, "\(size) bytes")
            #expect(await ReceiptSignature.check(spliced, payload: payload, roots: [authority.root], at: now) == nil, "\(size) bytes")
            #expect(await ReceiptSignature.check(plain, payload: payload, roots: [authority.root], at: now) == nil, "\(size) bytes")
            // The spliced message is canonical DER: read and written again, the same bytes
            #expect(try Self.encode(DER.parse(spliced), dropping: []) == spliced, "\(size) bytes")
            // and it differs from swift-certificates' own attached message only in the signature's bytes
            #expect(try Self.withoutSignature(spliced) == Self.withoutSignature(plain), "\(size) bytes")
        }
    }

    /// The message with its signer's signature emptied (ECDSA signatures differ at each signing):
    /// ContentInfo, [0], SignedData, signerInfos (its last), the first SignerInfo, its signature (last).
    static func withoutSignature(_ der: [UInt8]) throws -> [UInt8] {
        let root = try DER.parse(der)
        guard case .constructed(let info) = root.content, let wrapped = Array(info).last, case .constructed(let inner) = wrapped.content,
            let signedData = Array(inner).first, case .constructed(let fields) = signedData.content,
            let signerInfos = Array(fields).last, case .constructed(let infos) = signerInfos.content,
            let signerInfo = Array(infos).first, case .constructed(let signerFields) = signerInfo.content
        else { throw TestingError("not a signed message") }
        return try encode(root, dropping: [Array(signerFields).count - 1], at: [1, 0, Array(fields).count - 1, 0])
    }

    /// `node` encoded again from its parts; the child `dropping` of the node at `path` (child
    /// indexes from `node`) written as an empty OCTET STRING.
    static func encode(_ node: ASN1Node, dropping: [Int], at path: [Int] = []) throws -> [UInt8] {
        guard case .constructed(let children) = node.content else { return Array(node.encodedBytes) }
        var content: [UInt8] = []
        for (index, child) in Array(children).enumerated() {
            if path.isEmpty && dropping.contains(index) {
                content += [0x04, 0x00]
            } else if let next = path.first, next == index {
                content += try encode(child, dropping: dropping, at: Array(path.dropFirst()))
            } else {
                content += try encode(child, dropping: [], at: [-1])
            }
        }
        var out: [UInt8] = [node.encodedBytes.first!]
        if content.count < 0x80 {
            out.append(UInt8(content.count))
        } else {
            let bytes = withUnsafeBytes(of: UInt64(content.count).bigEndian) { Array($0) }.drop { $0 == 0 }
            out.append(0x80 | UInt8(bytes.count))
            out += bytes
        }
        return out + content
    }
}

/// RefreshReceipt's answer written directly against swift-protobuf's encoder.
struct RefreshReceiptJSONTests {
    @Test("2,000 random answers (base64 receipts, any text, empty, positions up to UInt64.max) are swift-protobuf's bytes exactly")
    func directMatchesSwiftProtobuf() throws {
        var random = SeededRandom(seed: 31)
        let alphabet = Array("ab+/=\"\\\n\u{0}\u{1f}\u{7f}\u{85}é日🎉 ".unicodeScalars)
        for index in 0..<2_000 {
            var response = Storebus_Receipt_V1_RefreshReceiptResponse()
            switch index % 4 {
            case 0:
                let bytes: [UInt8] = (0..<Int.random(in: 0...3000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                response.receiptData = Data(bytes).base64EncodedString()
            case 1:
                var text = String.UnicodeScalarView()
                for _ in 0..<Int.random(in: 0...40, using: &random) { text.append(alphabet.randomElement(using: &random)!) }
                response.receiptData = String(text)
            default: break
            }
            let positions: [UInt64] = [0, 1, UInt64.random(in: 0...UInt64.max, using: &random), .max]
            response.asOfSeq = positions[index % 4 == 3 ? 3 : Int.random(in: 0...2, using: &random)]
            let plain: [UInt8] = try response.jsonUTF8Bytes()
            #expect(RefreshReceiptJSON.encode(response) == plain, "\(String(decoding: plain, as: UTF8.self).prefix(80))")
        }
    }
}

/// SignNotifications' answer written directly against swift-protobuf's encoder.
struct SignNotificationsJSONTests {
    @Test("1,000 random answers (JWS-like payloads, any text, empty lists and strings) are swift-protobuf's bytes exactly")
    func directMatchesSwiftProtobuf() throws {
        var random = SeededRandom(seed: 97)
        let alphabet = Array("ab-_.+/=\"\\\n\u{0}\u{1f}\u{7f}\u{85}é日🎉 ".unicodeScalars)
        func text(_ longest: Int) -> String {
            var text = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 0...longest, using: &random) { text.append(alphabet.randomElement(using: &random)!) }
            return String(text)
        }
        for index in 0..<1_000 {
            var response = Storebus_Receipt_V1_SignNotificationsResponse()
            response.signedPayloads = (0..<(index % 5)).map { _ in
                if Bool.random(using: &random) {
                    let bytes: [UInt8] = (0..<Int.random(in: 0...4_000, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
                    return Data(bytes).base64EncodedString() + "." + text(6)
                }
                return text(60)
            }
            response.environment = [text(12), "Sandbox", ""][index % 3]
            let plain: [UInt8] = try response.jsonUTF8Bytes()
            #expect(SignNotificationsJSON.encode(response) == plain, "\(String(decoding: plain, as: UTF8.self).prefix(80))")
        }
    }
}

/// The payload walker against the plain reader (swift-asn1's nodes and types): the same receipts,
/// the same refusals.
struct ReceiptPayloadWalkerTests {
    @Test("receipts of 0 to 120 purchases and 15,400 damaged copies (bytes changed, inserted, removed, cut): the walker takes exactly what the plain reader takes, and reads the same receipt")
    func walkerMatchesPlain() throws {
        var random = SeededRandom(seed: 1712)
        var accepted = 0, refused = 0
        // Fewer copies of the large receipt: the plain reader takes milliseconds for each in a debug build.
        for (count, copies) in [(0, 4_000), (1, 4_000), (3, 4_000), (17, 3_000), (120, 400)] {
            let receipt = AppReceipt(
                receiptType: "ProductionSandbox", bundleID: "com.example.app", applicationVersion: "2.\(count)", opaqueValue: (0..<16).map { UInt8($0) },
                sha1Hash: Array(repeating: 3, count: 20), creationDate: Date(timeIntervalSince1970: 1_795_784_939),
                originalPurchaseDate: Date(timeIntervalSince1970: 1_700_000_000), originalApplicationVersion: "1.0",
                expirationDate: count == 3 ? Date(timeIntervalSince1970: 1_800_000_000) : nil,
                inApp: (0..<count).map { ReceiptPayloadTests.entry($0, random: &random) })
            let der = try receipt.der()
            let walked = try AppReceipt(der: der, walking: true)
            #expect(walked == (try AppReceipt(der: der, walking: false)), "\(count) purchases")
            #expect(walked.inApp.count == count)
            for _ in 0..<copies {
                var damaged = der
                for _ in 0..<Int.random(in: 1...3, using: &random) {
                    guard !damaged.isEmpty else { break }
                    let at = Int.random(in: 0..<damaged.count, using: &random)
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0: damaged.insert(UInt8.random(in: 0...255, using: &random), at: at)
                    case 1: damaged.remove(at: at)
                    case 2: damaged.removeLast(Int.random(in: 1...min(8, damaged.count), using: &random))
                    case 3: damaged[at] ^= 0x80
                    default: damaged[at] = UInt8.random(in: 0...255, using: &random)
                    }
                }
                let plain = try? AppReceipt(der: damaged, walking: false)
                let walkedDamaged = try? AppReceipt(der: damaged, walking: true)
                #expect(walkedDamaged == plain, "\(count) purchases, damaged: \(damaged.count) bytes")
                if plain == nil { refused += 1 } else { accepted += 1 }
            }
        }
        // Both outcomes were exercised
        #expect(accepted > 100 && refused > 1_000, "accepted \(accepted), refused \(refused)")
    }

    @Test("refused alike: a field missing or given twice, a non-minimal length or INTEGER, bytes after the set, a value of another type; unknown attributes skipped alike")
    func handMadeCases() throws {
        func attribute(_ type: Int, _ value: [UInt8]) throws -> ReceiptAttribute { ReceiptAttribute(type: type, value: value) }
        let base: [ReceiptAttribute] = [
            try attribute(0, ReceiptField.utf8("Production")), try attribute(2, ReceiptField.utf8("com.example.app")),
            try attribute(3, ReceiptField.utf8("1.0")), try attribute(4, [1, 2, 3]), try attribute(5, [4, 5]),
            try attribute(12, ReceiptField.date(Date(timeIntervalSince1970: 1_795_784_939))),
            try attribute(18, ReceiptField.date(Date(timeIntervalSince1970: 1_700_000_000))), try attribute(19, ReceiptField.utf8("1.0"))
        ]
        let good = try ReceiptAttribute.setDER(base)
        var cases: [(String, [UInt8], Bool)] = [("good", good, true)]
        cases.append(("unknown attribute", try ReceiptAttribute.setDER(base + [try attribute(1234, [0xff, 0x00])]), true))
        cases.append(("missing", try ReceiptAttribute.setDER(Array(base.dropLast())), false))
        cases.append(("twice", try ReceiptAttribute.setDER(base + [try attribute(2, ReceiptField.utf8("com.other"))]), false))
        cases.append(("wrong type", try ReceiptAttribute.setDER(Array(base.dropFirst()) + [try attribute(0, ReceiptField.integer(5))]), false))
        cases.append(("bytes after", good + [0x00], false))
        cases.append(("IA5 not ASCII", try ReceiptAttribute.setDER(Array(base.prefix(5)) + [try attribute(12, [0x16, 0x01, 0xe9])] + Array(base.suffix(2))), false))
        // A length in the long form although short: 0x31 0x81 <n>
        var long = good
        if good[1] < 0x80 {
            long = [0x31, 0x81] + good[1...]
        } else {
            long.insert(0x00, at: 2)
            long[1] += 1
        }
        cases.append(("long length", long, false))
        for (name, der, expected) in cases {
            let plain = try? AppReceipt(der: der, walking: false)
            let walked = try? AppReceipt(der: der, walking: true)
            #expect((plain != nil) == expected, "\(name): plain")
            #expect(walked == plain, "\(name)")
        }
    }
}
