import Foundation

/// The rules for the names that make up a payment queue: app bundle identifier, account and device.
///
/// The names are joined into the queue's key (`app|account|device`) and compared in two worlds that
/// disagree about equality: Swift compares strings by canonical equivalence (`"K"` equals the Kelvin
/// sign `"\u{212A}"`, and `"é"` equals `"e\u{301}"`), SQLite compares their bytes. A name that one of
/// them takes for another's would let an account read or act on another account's queue. Names in
/// Unicode normalization form C are equal in both or in neither (canonically equivalent strings
/// have one NFC form), so only those are accepted. NUL is refused too: a C string ends there, so
/// `"alice\u{0}x"` would meet `"alice"` wherever a name is handed to SQLite as one.
public enum QueueNames {
    /// Longest name, in bytes of UTF-8.
    public static let maxBytes = 255

    /// INVALID_ARGUMENT naming `field` unless `value` can name part of a queue: 1 to ``maxBytes`` bytes
    /// of UTF-8 in normalization form C, with no `|` (the key's separator), no line break and no NUL.
    public static func check(_ value: String, field: String) throws(RPCError) {
        let bytes = value.utf8
        guard !bytes.isEmpty, bytes.count <= maxBytes else {
            throw RPCError.invalidArgument(field: field, "must be 1 to \(maxBytes) bytes")
        }
        // Bytes, not characters: "|" followed by a combining mark is one character that is not "|".
        guard !bytes.contains(where: { $0 == UInt8(ascii: "|") || $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") || $0 == 0 }) else {
            throw RPCError.invalidArgument(field: field, "must not contain |, a line break or NUL")
        }
        // ASCII is NFC as it stands: only other names pay for normalizing (this runs on every call
        // naming a queue).
        guard !bytes.allSatisfy({ $0 < 0x80 }) else { return }
        let normalized = value.precomposedStringWithCanonicalMapping
        guard bytes.elementsEqual(normalized.utf8) else {
            throw RPCError.invalidArgument(field: field, "must be in Unicode normalization form C (NFC), as \"\(RPCError.echo(normalized))\" is")
        }
    }

    /// Checks the three names of a queue, reporting fields as `<prefix>appBundleId` and so on.
    public static func check(app: String, account: String, device: String, fieldPrefix: String = "") throws(RPCError) {
        try check(app, field: "\(fieldPrefix)appBundleId")
        try check(account, field: "\(fieldPrefix)accountId")
        try check(device, field: "\(fieldPrefix)deviceId")
    }

    /// Whether two names are the same name: byte for byte, as the databases compare them (not
    /// String's `==`, which compares canonical equivalence). One memcmp: a call through the gateway
    /// compares three names, and comparing UTF-8 views element by element took about 8K
    /// instructions of the payment queue's per purchase flow.
    public static func same(_ a: String, _ b: String) -> Bool {
        var (a, b) = (a, b)
        return a.withUTF8 { first in
            b.withUTF8 { second in
                guard first.count == second.count else { return false }
                guard let left = first.baseAddress, let right = second.baseAddress else { return true }
                return memcmp(left, right, first.count) == 0
            }
        }
    }
}
