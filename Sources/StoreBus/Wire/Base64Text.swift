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
}
