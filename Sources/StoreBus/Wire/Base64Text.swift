import ExtrasBase64
import Foundation

/// Standard base64 with padding, for the large byte strings the contract carries as text: receipts
/// (RefreshReceipt's `receiptData`, verifyReceipt's `latest_receipt`).
public enum Base64Text {
    /// `bytes` encoded by swift-extras-base64 (``FastPaths`` on), or by Foundation (off). A
    /// 1,000-purchase receipt is 370 KB: Foundation's encoder and the string it then checked were
    /// an eighth of a refresh's CPU. `Base64TextTests` holds the two to the same text.
    public static func encode(_ bytes: [UInt8], fast: Bool = FastPaths.enabled) -> String {
        guard fast else { return Data(bytes).base64EncodedString() }
        return Base64.encodeToString(bytes: bytes)
    }

    /// The bytes of base64 `text`, spaces, tabs and line breaks ignored (some clients wrap it),
    /// or nil when it is not base64. With ``FastPaths`` on, text with none of those is decoded by
    /// swift-extras-base64 from its own bytes (Foundation's decoder, after a copy without them,
    /// was a twentieth of a 100-purchase verification); what it refuses, and all text with fast
    /// paths off, goes to Foundation's. `Base64TextTests` holds the two to the same answers.
    public static func decode(_ text: String, fast: Bool = FastPaths.enabled) -> [UInt8]? {
        if fast,
            let decoded = text.utf8.withContiguousStorageIfAvailable({ bytes -> [UInt8]? in
                // Every byte of the alphabet is above 0x20: any byte at or below it is white space or
                // not base64, and goes the plain way.
                guard !bytes.isEmpty, bytes.allSatisfy({ $0 > 0x20 }) else { return nil }
                return try? Base64.decode(bytes: bytes)
            }), let decoded
        {
            return decoded
        }
        var utf8 = Array(text.utf8)
        utf8.removeAll { $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }
        guard !utf8.isEmpty, let data = Data(base64Encoded: Data(utf8)) else { return nil }
        return Array(data)
    }
}
