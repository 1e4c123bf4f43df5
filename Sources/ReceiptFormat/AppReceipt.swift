import Crypto
import Foundation
import SwiftASN1

/// The payload of an app receipt as Apple's Receipt Validation Programming Guide lays it out: a DER
/// `SET OF ReceiptAttribute`, each `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`,
/// whose value holds the DER of the field (UTF8String, INTEGER, IA5String dates in RFC 3339, or raw
/// bytes). In-app purchases are attributes of type 17 whose value is a SET OF attributes in turn.
public struct AppReceipt: Equatable, Sendable {
    /// "ProductionSandbox" or "Production" (type 0).
    public var receiptType: String
    /// CFBundleIdentifier (2).
    public var bundleID: String
    /// CFBundleVersion the receipt was issued for (3).
    public var applicationVersion: String
    /// Bytes that feed the hash (4): StoreBus keeps one per app, account and device.
    public var opaqueValue: [UInt8]
    /// SHA-1 of the device identifier, the opaque value and the bundle id's DER (5).
    public var sha1Hash: [UInt8]
    /// When the receipt was signed (12).
    public var creationDate: Date
    /// When the account first had the app (18).
    public var originalPurchaseDate: Date
    /// The app version the account first had (19).
    public var originalApplicationVersion: String
    /// When the receipt expires (21): volume purchases and expired sandbox receipts only.
    public var expirationDate: Date?
    /// The in-app purchases (17).
    public var inApp: [InAppPurchaseEntry]

    /// The receipt type of a receipt of `environment`.
    public static func receiptType(_ environment: ReceiptEnvironment) -> String {
        environment == .production ? "Production" : "ProductionSandbox"
    }

    /// The environment a receipt type names.
    public var environment: ReceiptEnvironment? {
        switch receiptType {
        case "Production": .production
        case "ProductionSandbox", "Sandbox": .sandbox
        default: nil
        }
    }

    /// The SHA-1 hash of a receipt for `deviceID`: over the device identifier's bytes (the 16 bytes
    /// of a UUID, as Apple uses identifierForVendor; else its UTF-8), `opaque`, and the DER of the
    /// bundle id's UTF8String.
    public static func hash(deviceID: String, opaque: [UInt8], bundleID: String) throws -> [UInt8] {
        var input = deviceIdentifierBytes(deviceID)
        input += opaque
        input += try ReceiptField.utf8(bundleID)
        return Array(Insecure.SHA1.hash(data: input))
    }

    /// A device id's bytes for the hash.
    public static func deviceIdentifierBytes(_ deviceID: String) -> [UInt8] {
        if let uuid = UUID(uuidString: deviceID) {
            return withUnsafeBytes(of: uuid.uuid) { Array($0) }
        }
        return Array(deviceID.utf8)
    }

    /// The DER of the payload.
    public func der() throws -> [UInt8] {
        try der(inAppAttributes: inApp.map { try $0.attributeDER() })
    }

    /// The DER of the payload with the in-app purchases given as their attributes' DER
    /// (``InAppPurchaseEntry/attributeDER()``, kept from when each purchase last changed) in place
    /// of ``inApp``: a receipt is the account's purchases copied, not encoded again each time.
    public func der(inAppAttributes: [[UInt8]]) throws -> [UInt8] {
        var attributes: [ReceiptAttribute] = [
            .init(type: 0, value: try ReceiptField.utf8(receiptType)),
            .init(type: 2, value: try ReceiptField.utf8(bundleID)),
            .init(type: 3, value: try ReceiptField.utf8(applicationVersion)),
            .init(type: 4, value: opaqueValue),
            .init(type: 5, value: sha1Hash),
            .init(type: 12, value: try ReceiptField.date(creationDate)),
            .init(type: 18, value: try ReceiptField.date(originalPurchaseDate)),
            .init(type: 19, value: try ReceiptField.utf8(originalApplicationVersion))
        ]
        if let expirationDate { attributes.append(.init(type: 21, value: try ReceiptField.date(expirationDate))) }
        var encoded = try attributes.map { attribute in
            var serializer = DER.Serializer()
            try serializer.serialize(attribute)
            return serializer.serializedBytes
        }
        encoded += inAppAttributes
        return ReceiptAttribute.setDER(encoded: encoded)
    }

    /// Decodes a payload. Throws ``ReceiptFormatError`` for DER that is not a set of attributes, a
    /// field missing or given twice, or a value of the wrong type; attributes of unknown types are
    /// skipped, as Apple's own parsers skip its undocumented ones.
    public init(der: [UInt8]) throws {
        self = try ReceiptPayloadWalker.receipt(der)
    }

    /// ``init(der:)``, `walking` the DER in place (``ReceiptPayloadWalker``, the default) or, not,
    /// through swift-asn1's nodes and types (the plain twin, with `STOREBUS_FAST_PATHS=off`).
    public init(der: [UInt8], walking: Bool) throws {
        self = walking ? try ReceiptPayloadWalker.receipt(der) : try AppReceipt(plainDER: der)
    }

    /// The plain reader: swift-asn1 parses the set, each attribute, each value.
    init(plainDER der: [UInt8]) throws {
        let fields = try ReceiptAttribute.fields(of: der, context: "receipt")
        receiptType = try fields.take(0, ReceiptField.readUTF8)
        bundleID = try fields.take(2, ReceiptField.readUTF8)
        applicationVersion = try fields.take(3, ReceiptField.readUTF8)
        opaqueValue = try fields.take(4, { $0 })
        sha1Hash = try fields.take(5, { $0 })
        creationDate = try fields.take(12, ReceiptField.readDate)
        originalPurchaseDate = try fields.take(18, ReceiptField.readDate)
        originalApplicationVersion = try fields.take(19, ReceiptField.readUTF8)
        expirationDate = try fields.optional(21, ReceiptField.readDate)
        inApp = try fields.all(17).map { try InAppPurchaseEntry(der: $0) }
    }

    /// A receipt with every field given.
    public init(
        receiptType: String, bundleID: String, applicationVersion: String, opaqueValue: [UInt8], sha1Hash: [UInt8],
        creationDate: Date, originalPurchaseDate: Date, originalApplicationVersion: String, expirationDate: Date?,
        inApp: [InAppPurchaseEntry]
    ) {
        self.receiptType = receiptType
        self.bundleID = bundleID
        self.applicationVersion = applicationVersion
        self.opaqueValue = opaqueValue
        self.sha1Hash = sha1Hash
        self.creationDate = creationDate
        self.originalPurchaseDate = originalPurchaseDate
        self.originalApplicationVersion = originalApplicationVersion
        self.expirationDate = expirationDate
        self.inApp = inApp
    }
}

/// One in-app purchase of a receipt (attribute 17).
public struct InAppPurchaseEntry: Equatable, Sendable {
    /// 1701.
    public var quantity: Int
    /// 1702.
    public var productID: String
    /// 1703.
    public var transactionID: String
    /// 1705.
    public var originalTransactionID: String
    /// 1704.
    public var purchaseDate: Date
    /// 1706.
    public var originalPurchaseDate: Date
    /// 1707: 0 consumable, 1 non-consumable, 2 auto-renewable subscription, 3 non-renewing
    /// subscription (Apple leaves this field undocumented; StoreBus numbers it so).
    public var productType: Int
    /// 1708: end of the subscription period.
    public var expiresDate: Date?
    /// 1711: the subscription purchase's id across devices.
    public var webOrderLineItemID: Int64?
    /// 1712: when refunded.
    public var cancellationDate: Date?
    /// 1713.
    public var isTrialPeriod: Bool
    /// 1719.
    public var isInIntroOfferPeriod: Bool

    /// An entry with every field given.
    public init(
        quantity: Int, productID: String, transactionID: String, originalTransactionID: String, purchaseDate: Date,
        originalPurchaseDate: Date, productType: Int, expiresDate: Date?, webOrderLineItemID: Int64?,
        cancellationDate: Date?, isTrialPeriod: Bool, isInIntroOfferPeriod: Bool
    ) {
        self.quantity = quantity
        self.productID = productID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.productType = productType
        self.expiresDate = expiresDate
        self.webOrderLineItemID = webOrderLineItemID
        self.cancellationDate = cancellationDate
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
    }

    /// The DER of the receipt attribute (type 17) holding this purchase, as a receipt's payload
    /// carries it.
    public func attributeDER() throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(ReceiptAttribute(type: 17, value: try ReceiptAttribute.setDER(attributes())))
        return serializer.serializedBytes
    }

    func attributes() throws -> [ReceiptAttribute] {
        var attributes: [ReceiptAttribute] = [
            .init(type: 1701, value: try ReceiptField.integer(Int64(quantity))),
            .init(type: 1702, value: try ReceiptField.utf8(productID)),
            .init(type: 1703, value: try ReceiptField.utf8(transactionID)),
            .init(type: 1704, value: try ReceiptField.date(purchaseDate)),
            .init(type: 1705, value: try ReceiptField.utf8(originalTransactionID)),
            .init(type: 1706, value: try ReceiptField.date(originalPurchaseDate)),
            .init(type: 1707, value: try ReceiptField.integer(Int64(productType))),
            .init(type: 1713, value: try ReceiptField.integer(isTrialPeriod ? 1 : 0)),
            .init(type: 1719, value: try ReceiptField.integer(isInIntroOfferPeriod ? 1 : 0))
        ]
        if let expiresDate { attributes.append(.init(type: 1708, value: try ReceiptField.date(expiresDate))) }
        if let webOrderLineItemID { attributes.append(.init(type: 1711, value: try ReceiptField.integer(webOrderLineItemID))) }
        // Apple writes an empty cancellation date for a purchase never refunded.
        attributes.append(.init(type: 1712, value: try cancellationDate.map(ReceiptField.date) ?? ReceiptField.ia5("")))
        return attributes
    }

    init(der: [UInt8]) throws {
        let fields = try ReceiptAttribute.fields(of: der, context: "in-app purchase")
        quantity = Int(try fields.take(1701, ReceiptField.readInteger))
        productID = try fields.take(1702, ReceiptField.readUTF8)
        transactionID = try fields.take(1703, ReceiptField.readUTF8)
        purchaseDate = try fields.take(1704, ReceiptField.readDate)
        originalTransactionID = try fields.take(1705, ReceiptField.readUTF8)
        originalPurchaseDate = try fields.take(1706, ReceiptField.readDate)
        productType = Int(try fields.optional(1707, ReceiptField.readInteger) ?? -1)
        expiresDate = try fields.optional(1708, ReceiptField.readDate)
        webOrderLineItemID = try fields.optional(1711, ReceiptField.readInteger)
        cancellationDate = try fields.optional(1712, ReceiptField.readOptionalDate) ?? nil
        isTrialPeriod = try fields.optional(1713, ReceiptField.readInteger) == 1
        isInIntroOfferPeriod = try fields.optional(1719, ReceiptField.readInteger) == 1
    }
}

/// Why a receipt's bytes are not a receipt.
public struct ReceiptFormatError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// `ReceiptAttribute ::= SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
struct ReceiptAttribute: DERImplicitlyTaggable, Equatable {
    static var defaultIdentifier: ASN1Identifier { .sequence }

    var type: Int
    var version: Int = 1
    var value: [UInt8]

    init(type: Int, version: Int = 1, value: [UInt8]) {
        self.type = type
        self.version = version
        self.value = value
    }

    init(derEncoded node: ASN1Node, withIdentifier identifier: ASN1Identifier) throws {
        self = try DER.sequence(node, identifier: identifier) { nodes in
            let type = try Int(derEncoded: &nodes)
            let version = try Int(derEncoded: &nodes)
            let value = try ASN1OctetString(derEncoded: &nodes)
            return ReceiptAttribute(type: type, version: version, value: Array(value.bytes))
        }
    }

    func serialize(into coder: inout DER.Serializer, withIdentifier identifier: ASN1Identifier) throws {
        try coder.appendConstructedNode(identifier: identifier) { coder in
            try coder.serialize(type)
            try coder.serialize(version)
            try coder.serialize(ASN1OctetString(contentBytes: value[...]))
        }
    }

    /// The DER of a SET OF `attributes` (sorted, as DER orders a set).
    static func setDER(_ attributes: [ReceiptAttribute]) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serializeSetOf(attributes)
        return serializer.serializedBytes
    }

    /// The DER of a SET OF elements given as their DER, sorted as DER orders a set (bytewise, a
    /// shorter encoding that is the prefix of a longer one first).
    static func setDER(encoded elements: [[UInt8]]) -> [UInt8] {
        let sorted = elements.sorted(by: derPrecedes)
        let length = sorted.reduce(0) { $0 + $1.count }
        var out: [UInt8] = [0x31]
        out.reserveCapacity(length + 6)
        if length < 0x80 {
            out.append(UInt8(length))
        } else {
            var bytes: [UInt8] = []
            var rest = length
            while rest > 0 {
                bytes.insert(UInt8(rest & 0xff), at: 0)
                rest >>= 8
            }
            out.append(0x80 | UInt8(bytes.count))
            out += bytes
        }
        for element in sorted { out += element }
        return out
    }

    /// Whether `a` comes before `b` in a DER set: bytewise, a prefix first. By `memcmp`: the
    /// generic `lexicographicallyPrecedes` compared a byte at a time through the iterators, and a
    /// receipt of 1,000 purchases sorts some 10,000 pairs whose first ten bytes or so are the same.
    static func derPrecedes(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        let common = min(a.count, b.count)
        let order =
            common == 0
            ? 0 : a.withUnsafeBufferPointer { pa in b.withUnsafeBufferPointer { pb in memcmp(pa.baseAddress!, pb.baseAddress!, common) } }
        return order != 0 ? order < 0 : a.count < b.count
    }

    /// The attributes of a SET OF, by type. The set's order is not checked (Apple's parsers read
    /// sets in any order; checking DER's took a third of reading a receipt of 100 purchases).
    static func fields(of der: [UInt8], context: String) throws -> Fields {
        var byType: [Int: [[UInt8]]] = [:]
        do {
            let root = try DER.parse(der)
            guard root.identifier == .set, case .constructed(let children) = root.content else {
                throw ReceiptFormatError("the \(context) is not a set")
            }
            for child in children {
                let attribute = try ReceiptAttribute(derEncoded: child)
                byType[attribute.type, default: []].append(attribute.value)
            }
        } catch let error as ReceiptFormatError {
            throw error
        } catch {
            throw ReceiptFormatError("the \(context) is not a DER set of receipt attributes: \(error)")
        }
        return Fields(context: context, byType: byType)
    }

    /// Attributes by type, taken one field at a time.
    struct Fields {
        let context: String
        let byType: [Int: [[UInt8]]]

        /// The value of the one attribute of `type`; throws when it is missing or given twice.
        func take<T>(_ type: Int, _ read: ([UInt8]) throws -> T) throws -> T {
            guard let value = try optional(type, read) else { throw ReceiptFormatError("the \(context) has no attribute \(type)") }
            return value
        }

        /// The value of the attribute of `type` when there is one; throws when it is given twice.
        func optional<T>(_ type: Int, _ read: ([UInt8]) throws -> T) throws -> T? {
            guard let values = byType[type] else { return nil }
            guard values.count == 1 else { throw ReceiptFormatError("the \(context) has attribute \(type) \(values.count) times") }
            do {
                return try read(values[0])
            } catch let error as ReceiptFormatError {
                throw error
            } catch {
                throw ReceiptFormatError("attribute \(type) of the \(context) is not what it should hold: \(error)")
            }
        }

        /// Every value of the attributes of `type`.
        func all(_ type: Int) -> [[UInt8]] { byType[type] ?? [] }
    }
}

/// The DER of receipt attribute values.
enum ReceiptField {
    static func utf8(_ value: String) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(ASN1UTF8String(value))
        return serializer.serializedBytes
    }

    static func ia5(_ value: String) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(try ASN1IA5String(value))
        return serializer.serializedBytes
    }

    static func integer(_ value: Int64) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(value)
        return serializer.serializedBytes
    }

    /// An IA5String in RFC 3339, seconds precision, UTC: "2026-11-27T13:08:59Z".
    static func date(_ value: Date) throws -> [UInt8] {
        try ia5(UTCDate.rfc3339(value))
    }

    static func readUTF8(_ der: [UInt8]) throws -> String {
        String(try ASN1UTF8String(derEncoded: der[...]))
    }

    static func readInteger(_ der: [UInt8]) throws -> Int64 {
        try Int64(derEncoded: der[...])
    }

    static func readDate(_ der: [UInt8]) throws -> Date {
        guard let date = try readOptionalDate(der) else { throw ReceiptFormatError("an empty date") }
        return date
    }

    /// An IA5String date, or nil for an empty one.
    static func readOptionalDate(_ der: [UInt8]) throws -> Date? {
        let text = String(try ASN1IA5String(derEncoded: der[...]))
        if text.isEmpty { return nil }
        guard let date = UTCDate.parse(text) else {
            throw ReceiptFormatError("\(text.prefix(40)) is not an RFC 3339 date")
        }
        return date
    }
}
