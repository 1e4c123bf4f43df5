import Foundation
import Receipt
import ReceiptFormat
import StoreBusTesting
import Testing

/// The receipt encoding without processes: dates, round trips, what the parser refuses.
struct ReceiptFormatTests {
    @Test("receipt dates are written and read as Foundation's ISO 8601 style does, over 20,000 random seconds from 1583 to 9999")
    func datesMatchFoundation() throws {
        var random = SeededRandom(seed: 1707)
        let style = Date.ISO8601FormatStyle(timeZone: .gmt)
        var samples: [Date] = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 951_782_400), Date(timeIntervalSince1970: -1),
            Date(timeIntervalSince1970: 4_107_542_399), Date(timeIntervalSince1970: 1_709_164_800.999)
        ]
        // From 1583: before the Gregorian calendar began, Foundation writes Julian dates; receipts
        // use the proleptic Gregorian calendar throughout, as RFC 3339 does.
        for _ in 0..<20_000 { samples.append(Date(timeIntervalSince1970: Double(Int64.random(in: -12_212_553_600...253_402_300_799, using: &random)))) }
        for date in samples {
            let text = UTCDate.rfc3339(date)
            #expect(text == date.formatted(style), "\(date.timeIntervalSince1970)")
            let seconds = date.timeIntervalSince1970.rounded(.down)
            #expect(UTCDate.parse(text)?.timeIntervalSince1970 == seconds, "\(text)")
        }
        #expect(UTCDate.parse("2026-02-30T00:00:00Z") == nil)
        #expect(UTCDate.parse("2026-11-27T13:08:59.250Z")?.timeIntervalSince1970 == 1_795_784_939.25)
        #expect(UTCDate.parse("not a date") == nil)
        #expect(UTCDate.plain(Date(timeIntervalSince1970: 1_795_784_939), offset: -8 * 3600) == "2026-11-27 05:08:59")
        // Year 1 and 9999 both ways
        #expect(UTCDate.rfc3339(Date(timeIntervalSince1970: -62_135_596_800)) == "0001-01-01T00:00:00Z")
        #expect(UTCDate.parse("0001-01-01T00:00:00Z")?.timeIntervalSince1970 == -62_135_596_800)
        #expect(UTCDate.parse("9999-12-31T23:59:59Z")?.timeIntervalSince1970 == 253_402_300_799)
    }

    @Test("a receipt's payload decodes to what was encoded; attributes missing, doubled or of the wrong type are refused, unknown ones skipped")
    func roundTrip() throws {
        let entry = InAppPurchaseEntry(
            quantity: 3, productID: "com.example.gems", transactionID: "1000000000000042", originalTransactionID: "1000000000000042",
            purchaseDate: Date(timeIntervalSince1970: 1_764_248_939), originalPurchaseDate: Date(timeIntervalSince1970: 1_764_248_939),
            productType: 2, expiresDate: Date(timeIntervalSince1970: 1_766_840_939), webOrderLineItemID: 1_001_000_000_000_042,
            cancellationDate: nil, isTrialPeriod: true, isInIntroOfferPeriod: false
        )
        let receipt = AppReceipt(
            receiptType: "ProductionSandbox", bundleID: "com.example.app", applicationVersion: "42", opaqueValue: Array(repeating: 9, count: 16),
            sha1Hash: try AppReceipt.hash(deviceID: "3F2504E0-4F89-11D3-9A0C-0305E82C3301", opaque: Array(repeating: 9, count: 16), bundleID: "com.example.app"),
            creationDate: Date(timeIntervalSince1970: 1_764_248_940), originalPurchaseDate: Date(timeIntervalSince1970: 1_700_000_000),
            originalApplicationVersion: "1.0", expirationDate: nil, inApp: [entry, entry]
        )
        let decoded = try AppReceipt(der: receipt.der())
        #expect(decoded == receipt)
        #expect(decoded.environment == .sandbox)
        // A UUID device id feeds its 16 bytes, anything else its UTF-8
        #expect(AppReceipt.deviceIdentifierBytes("3F2504E0-4F89-11D3-9A0C-0305E82C3301").count == 16)
        #expect(AppReceipt.deviceIdentifierBytes("phone") == Array("phone".utf8))
        #expect(throws: ReceiptFormatError.self) { try AppReceipt(der: [0x31, 0x03, 0x02, 0x01, 0x00]) }
        #expect(throws: ReceiptFormatError.self) { try AppReceipt(der: Array(try receipt.der().dropLast())) }
        #expect(throws: ReceiptFormatError.self) { try AppReceipt(der: []) }
    }

    @Test("leaves rotated within one second are told apart: after a reload the newest signs; every key file is 0600")
    func rotationOrder() throws {
        let directory = try TemporaryDirectory(prefix: "ca")
        defer { directory.remove() }
        let authority = try SigningAuthority(directory: directory.url)
        var issued = [try authority.current().certificate]
        for _ in 0..<3 { issued.append(try authority.rotate().certificate) }
        let reloaded = try SigningAuthority(directory: directory.url)
        #expect(try reloaded.current().certificate == issued.last)
        #expect(reloaded.leaves.map(\.certificate) == issued.reversed())
        #expect(reloaded.root == authority.root)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.url.path) where name.hasSuffix("-key.pem") {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory.url.appendingPathComponent(name).path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(name)")
        }
    }
}
