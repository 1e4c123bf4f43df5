import Foundation

/// Reads a receipt's payload by walking its DER in place: each attribute's type and the bounds of
/// its value found without building swift-asn1's nodes, arrays of values or a dictionary by type,
/// and only the values of the fields a receipt has decoded. Reading a 100-purchase receipt's payload
/// that way (``ReceiptAttribute/fields(of:context:)`` and swift-asn1's types) was a third of
/// VerifyReceipt's CPU.
///
/// It accepts and refuses what the plain reader does (the DER rules swift-asn1 applies to these
/// types: single-byte tags, definite lengths in their shortest form, INTEGERs in their shortest form,
/// IA5Strings of ASCII, no bytes left over), and gives the same receipt (`ReceiptPayloadWalkerTests`
/// compares the two on receipts and on thousands of damaged copies).
enum ReceiptPayloadWalker {
    /// An attribute: its type, and where its value's bytes lie (the OCTET STRING's content).
    struct Attribute {
        var type: Int
        var value: Range<Int>
    }

    /// The receipt in `der`.
    static func receipt(_ der: [UInt8]) throws -> AppReceipt {
        try der.withUnsafeBufferPointer { bytes in
            let top = try attributes(bytes, 0..<bytes.count, context: "receipt")
            let fields = Fields(bytes: bytes, attributes: top, context: "receipt")
            var inApp: [InAppPurchaseEntry] = []
            for attribute in top where attribute.type == 17 {
                let entry = Fields(bytes: bytes, attributes: try attributes(bytes, attribute.value, context: "in-app purchase"), context: "in-app purchase")
                inApp.append(try entry.inAppPurchase())
            }
            return AppReceipt(
                receiptType: try fields.take(0, utf8), bundleID: try fields.take(2, utf8), applicationVersion: try fields.take(3, utf8),
                opaqueValue: try fields.take(4, { bytes, range in Array(bytes[range]) }), sha1Hash: try fields.take(5, { bytes, range in Array(bytes[range]) }),
                creationDate: try fields.take(12, date), originalPurchaseDate: try fields.take(18, date),
                originalApplicationVersion: try fields.take(19, utf8), expirationDate: try fields.optional(21, date), inApp: inApp)
        }
    }

    /// The attributes of the SET OF that exactly fills `range`.
    static func attributes(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, context: String) throws -> [Attribute] {
        // The set's elements and theirs are walked below: not checked a first time here.
        let set = try element(bytes, at: range.lowerBound, within: range.upperBound, checkingContent: false)
        guard set.tag == 0x31, set.end == range.upperBound else {
            throw ReceiptFormatError(set.tag == 0x31 ? "the \(context) is not a DER set of receipt attributes: bytes after the set" : "the \(context) is not a set")
        }
        var attributes: [Attribute] = []
        attributes.reserveCapacity(16)
        var index = set.content.lowerBound
        do {
            while index < set.content.upperBound {
                let sequence = try element(bytes, at: index, within: set.content.upperBound, checkingContent: false)
                guard sequence.tag == 0x30 else { throw ReceiptFormatError("an attribute is not a SEQUENCE") }
                let type = try element(bytes, at: sequence.content.lowerBound, within: sequence.content.upperBound)
                let version = try element(bytes, at: type.end, within: sequence.content.upperBound)
                let value = try element(bytes, at: version.end, within: sequence.content.upperBound)
                guard type.tag == 0x02, version.tag == 0x02, value.tag == 0x04, value.end == sequence.content.upperBound else {
                    throw ReceiptFormatError("an attribute is not { type INTEGER, version INTEGER, value OCTET STRING }")
                }
                _ = try integer(bytes, version.content)
                let number = try integer(bytes, type.content)
                guard let typeNumber = Int(exactly: number) else { throw ReceiptFormatError("an attribute type out of range") }
                attributes.append(Attribute(type: typeNumber, value: value.content))
                index = sequence.end
            }
        } catch let error as ReceiptFormatError {
            throw ReceiptFormatError("the \(context) is not a DER set of receipt attributes: \(error.description)")
        }
        return attributes
    }

    /// One element's tag, its content's bounds and where it ends, read at `start`; it must end at or
    /// before `limit`. A constructed element's content is checked to be whole elements, unless the
    /// caller walks it itself (`checkingContent` false).
    static func element(
        _ bytes: UnsafeBufferPointer<UInt8>, at start: Int, within limit: Int, checkingContent: Bool = true
    ) throws -> (tag: UInt8, content: Range<Int>, end: Int) {
        guard start + 2 <= limit else { throw ReceiptFormatError("truncated") }
        let tag = bytes[start]
        // Tag numbers of 31 and above (several bytes) are not any of a receipt's types.
        guard tag & 0x1f != 0x1f else { throw ReceiptFormatError("a tag of several bytes") }
        let first = bytes[start + 1]
        var length = 0
        var contentStart = start + 2
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7f)
            // 0x80 is BER's indefinite length; DER's long form is the shortest, and past 4 bytes no
            // receipt fits in memory.
            guard count >= 1, count <= 4, start + 2 + count <= limit else { throw ReceiptFormatError("a length DER does not allow") }
            for offset in 0..<count { length = length << 8 | Int(bytes[start + 2 + offset]) }
            guard bytes[start + 2] != 0, length >= 0x80 else { throw ReceiptFormatError("a length not in its shortest form") }
            contentStart += count
        }
        guard length <= limit - contentStart else { throw ReceiptFormatError("truncated") }
        // Constructed types hold elements: each must be whole (as swift-asn1 parses the tree).
        if checkingContent && tag & 0x20 != 0 {
            var index = contentStart
            while index < contentStart + length { index = try element(bytes, at: index, within: contentStart + length).end }
        }
        return (tag, contentStart..<(contentStart + length), contentStart + length)
    }

    /// An INTEGER's value (its content's bytes), in its shortest form and within 64 bits.
    static func integer(_ bytes: UnsafeBufferPointer<UInt8>, _ content: Range<Int>) throws -> Int64 {
        guard !content.isEmpty else { throw ReceiptFormatError("an INTEGER with no bytes") }
        if content.count > 1 {
            let (first, second) = (bytes[content.lowerBound], bytes[content.lowerBound + 1])
            guard !(first == 0 && second & 0x80 == 0), !(first == 0xff && second & 0x80 != 0) else {
                throw ReceiptFormatError("an INTEGER not in its shortest form")
            }
        }
        guard content.count <= 8 else { throw ReceiptFormatError("an INTEGER out of range") }
        var value: UInt64 = bytes[content.lowerBound] & 0x80 != 0 ? .max : 0
        for index in content { value = value << 8 | UInt64(bytes[index]) }
        return Int64(bitPattern: value)
    }

    /// The one element that fills `range` (a field's value), with `tag`: its content.
    static func only(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, tag: UInt8) throws -> Range<Int> {
        let value = try element(bytes, at: range.lowerBound, within: range.upperBound)
        guard value.end == range.upperBound else { throw ReceiptFormatError("bytes after the value") }
        guard value.tag == tag else { throw ReceiptFormatError("a value of another type (tag \(value.tag))") }
        return value.content
    }

    static func utf8(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) throws -> String {
        String(decoding: UnsafeBufferPointer(rebasing: bytes[try only(bytes, range, tag: 0x0c)]), as: UTF8.self)
    }

    static func integerField(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) throws -> Int64 {
        try integer(bytes, try only(bytes, range, tag: 0x02))
    }

    /// An IA5String date, or nil for an empty one.
    static func optionalDate(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) throws -> Date? {
        let content = try only(bytes, range, tag: 0x16)
        guard !content.contains(where: { bytes[$0] >= 0x80 }) else { throw ReceiptFormatError("an IA5String that is not ASCII") }
        if content.isEmpty { return nil }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[content]), as: UTF8.self)
        guard let date = UTCDate.parse(text) else { throw ReceiptFormatError("\(text.prefix(40)) is not an RFC 3339 date") }
        return date
    }

    static func date(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) throws -> Date {
        guard let date = try optionalDate(bytes, range) else { throw ReceiptFormatError("an empty date") }
        return date
    }

    /// A set's attributes, taken one field at a time, as ``ReceiptAttribute/Fields`` takes them.
    struct Fields {
        let bytes: UnsafeBufferPointer<UInt8>
        let attributes: [Attribute]
        let context: String

        func take<T>(_ type: Int, _ read: (UnsafeBufferPointer<UInt8>, Range<Int>) throws -> T) throws -> T {
            guard let value = try optional(type, read) else { throw ReceiptFormatError("the \(context) has no attribute \(type)") }
            return value
        }

        func optional<T>(_ type: Int, _ read: (UnsafeBufferPointer<UInt8>, Range<Int>) throws -> T) throws -> T? {
            var found: Range<Int>?
            var count = 0
            for attribute in attributes where attribute.type == type {
                found = attribute.value
                count += 1
            }
            guard let found else { return nil }
            guard count == 1 else { throw ReceiptFormatError("the \(context) has attribute \(type) \(count) times") }
            do {
                return try read(bytes, found)
            } catch let error as ReceiptFormatError {
                throw ReceiptFormatError("attribute \(type) of the \(context) is not what it should hold: \(error.description)")
            }
        }

        func inAppPurchase() throws -> InAppPurchaseEntry {
            InAppPurchaseEntry(
                quantity: Int(try take(1701, ReceiptPayloadWalker.integerField)), productID: try take(1702, ReceiptPayloadWalker.utf8),
                transactionID: try take(1703, ReceiptPayloadWalker.utf8), originalTransactionID: try take(1705, ReceiptPayloadWalker.utf8),
                purchaseDate: try take(1704, ReceiptPayloadWalker.date), originalPurchaseDate: try take(1706, ReceiptPayloadWalker.date),
                productType: Int(try optional(1707, ReceiptPayloadWalker.integerField) ?? -1),
                expiresDate: try optional(1708, ReceiptPayloadWalker.date), webOrderLineItemID: try optional(1711, ReceiptPayloadWalker.integerField),
                cancellationDate: try optional(1712, ReceiptPayloadWalker.optionalDate) ?? nil,
                isTrialPeriod: try optional(1713, ReceiptPayloadWalker.integerField) == 1,
                isInIntroOfferPeriod: try optional(1719, ReceiptPayloadWalker.integerField) == 1)
        }
    }
}
