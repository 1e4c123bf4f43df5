import Foundation

/// Constants and limits of StoreBus's ZeroMQ wire protocol, version 1 (proto-schemas/README.md).
///
/// Every StoreBus RPC message is a ZeroMQ multipart message: zero or more routing frames, an empty
/// delimiter frame, a header frame, and (for requests and responses) a body frame. The header is
/// UTF-8 text, lines separated by `\n`, whose first line is a 4-character tag saying what the message
/// is:
///
/// - request: `SB1Q`, request id, timeout in ms (empty: none), method path, then metadata lines
///   `key: value`; the body is the request message as proto3 JSON.
/// - response: `SB1R`, request id, status code; the body is the response message on OK, an
///   `ErrorStatus` otherwise.
/// - cancel: `SB1C`, request id; no body, no answer.
///
/// Fixed fields share one frame because libzmq's cost is per frame, on both sides and in its I/O
/// thread. Doorbells on PUB sockets are two frames: the topic, then `SB1E`, seq, key seq (and the
/// shard and the event's topics when known), and may carry the event as a third (`Doorbell`).
public enum WireProtocol {
    /// First line of a request header.
    public static let requestTag: [UInt8] = Array("SB1Q".utf8)
    /// First line of a response header.
    public static let responseTag: [UInt8] = Array("SB1R".utf8)
    /// First line of a cancel header.
    public static let cancelTag: [UInt8] = Array("SB1C".utf8)
    /// First line of a doorbell's second frame.
    public static let doorbellTag: [UInt8] = Array("SB1E".utf8)

    /// Longest request id, in bytes (printable ASCII, no spaces).
    public static let maxRequestIDBytes = 64
    /// Largest header frame, in bytes.
    public static let maxHeaderBytes = 16 * 1024
    /// Longest method path, in bytes.
    public static let maxMethodBytes = 256
    /// Most routing frames before the delimiter (one per forwarding hop).
    public static let maxRoutingFrames = 8
    /// Default largest message a StoreBus socket accepts (MAXMSGSIZE); larger ones close the connection.
    public static let defaultMaxMessageBytes: Int64 = 4 * 1024 * 1024
    /// Longest timeout a request may carry (one day); longer values are treated as this.
    public static let maxTimeoutMilliseconds: UInt64 = 86_400_000

    /// Metadata key for the idempotency key that makes a non-idempotent call safe to retry.
    public static let idempotencyKeyMetadata = "idempotency-key"
    /// Metadata key a forwarder (the gateway) sets to the request id its caller gave the call, which
    /// it re-issues under an id of its own; servers log it as `caller.request.id` (§12).
    public static let callerRequestIDMetadata = "caller-request-id"
}

/// Metadata of a call: lower-case keys to single-line values. On the wire, one `key: value` line per
/// entry at the end of the request header.
public struct Metadata: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    /// One entry: a key and its value.
    public struct Entry: Sendable, Equatable {
        public let key: String
        public var value: String
    }

    /// The entries, each key once, in the order they were first set. A call carries a handful, so
    /// finding one by comparing keys costs less than hashing them: as a dictionary, metadata took
    /// about 3% of the gateway's instructions per purchase flow, in hashing and storage.
    public private(set) var entries: [Entry]

    /// Empty metadata.
    public init() { entries = [] }
    /// Metadata from a dictionary.
    public init(_ values: [String: String]) {
        entries = values.map { Entry(key: $0.key, value: $0.value) }
    }
    public init(dictionaryLiteral elements: (String, String)...) {
        entries = []
        for (key, value) in elements { self[key] = value }
    }

    /// The entries as a dictionary.
    public var values: [String: String] {
        Dictionary(entries.map { ($0.key, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    public var isEmpty: Bool { entries.isEmpty }

    /// The value for a key; setting nil removes the entry.
    public subscript(key: String) -> String? {
        get { entries.first { $0.key == key }?.value }
        set {
            let index = entries.firstIndex { $0.key == key }
            switch (index, newValue) {
            case (let index?, let value?): entries[index].value = value
            case (let index?, nil): entries.remove(at: index)
            case (nil, let value?): entries.append(Entry(key: key, value: value))
            case (nil, nil): break
            }
        }
    }

    /// The same entries, whatever their order.
    public static func == (lhs: Metadata, rhs: Metadata) -> Bool {
        lhs.entries.count == rhs.entries.count && lhs.entries.allSatisfy { rhs[$0.key] == $0.value }
    }

    /// Whether a key is a valid metadata key: 1 to 64 of `a-z 0-9 - _ .`.
    public static func isValidKey(_ key: String) -> Bool {
        isValidKey(key.utf8)
    }

    /// Whether the UTF-8 bytes of a key make a valid metadata key.
    static func isValidKey(_ key: some Collection<UInt8>) -> Bool {
        guard !key.isEmpty, key.count <= 64 else { return false }
        return key.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F || $0 == 0x2E }
    }

    /// Whether `value` holds a line break (LF or CR), which a header line cannot carry. A session
    /// token is checked on every call: memchr's word-at-a-time search takes a few dozen
    /// instructions for one, where a byte loop took about 2,400 (15K through the generic scan of a
    /// String's UTF-8 view).
    public static func holdsLineBreak(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { bytes in holds(0x0A, bytes) || holds(0x0D, bytes) }
    }

    /// Whether `bytes` hold `byte`, found with memchr.
    static func holds(_ byte: UInt8, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let start = bytes.baseAddress else { return false }
        return memchr(start, Int32(byte), bytes.count) != nil
    }

    /// The wire frame.
    public var encoded: [UInt8] {
        if entries.isEmpty { return [] }
        var out: [UInt8] = []
        for entry in entries.sorted(by: { $0.key < $1.key }) {
            if !out.isEmpty { out.append(0x0A) }
            out.append(contentsOf: entry.key.utf8)
            out.append(contentsOf: [0x3A, 0x20])
            out.append(contentsOf: entry.value.utf8)
        }
        return out
    }

    /// Parses metadata lines; nil when a line is not `key: value` with a valid key, or a value holds
    /// a carriage return.
    public init?(lines: some Collection<ArraySlice<UInt8>>) {
        entries = []
        entries.reserveCapacity(min(lines.count, Self.linearLines))
        // Past a handful of lines, keys are found through a dictionary: a header of 16 KiB holds
        // thousands of short lines, and finding each key among those before it would take time
        // growing with the square of their number, for anyone who sends such a header.
        var positions: [String: Int]?
        for line in lines {
            guard let colon = line.firstIndex(of: 0x3A) else { return nil }
            let keyBytes = line[line.startIndex..<colon]
            var valueStart = line.index(after: colon)
            if valueStart < line.endIndex && line[valueStart] == 0x20 { valueStart = line.index(after: valueStart) }
            let valueBytes = line[valueStart...]
            // Checked as bytes, before any String is made of them (a session token is checked on
            // every call: with memchr, not a byte loop).
            guard Metadata.isValidKey(keyBytes), !valueBytes.withUnsafeBufferPointer({ Metadata.holds(0x0D, $0) }) else { return nil }
            let key = String(decoding: keyBytes, as: UTF8.self)
            let value = String(decoding: valueBytes, as: UTF8.self)
            if positions == nil && entries.count < Self.linearLines {
                self[key] = value
                continue
            }
            if positions == nil {
                positions = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($1.key, $0) })
            }
            if let index = positions?[key] {
                entries[index].value = value
            } else {
                positions?[key] = entries.count
                entries.append(Entry(key: key, value: value))
            }
        }
    }

    /// Lines of a header parsed by comparing keys, before a dictionary takes over.
    static let linearLines = 16
}
